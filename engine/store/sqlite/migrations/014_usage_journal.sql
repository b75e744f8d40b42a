-- Where a usage record that commits nearly alone (a call on a quiet gateway) is written first:
-- one B-tree with no index, where usage_records has six to write (the table, its id and four
-- indexes), each page of them a WAL frame of its own when a commit carries one record. The store
-- moves the journal's records into usage_records in batches, where the six B-trees are written
-- once per batch, and before it reads usage_records (./usage.ts). The same columns as
-- usage_records: a migration that adds a column to one adds it to the other (a test holds them
-- equal).
CREATE TABLE usage_journal (
  id                   TEXT NOT NULL,
  created_at           INTEGER NOT NULL,
  trace_id             TEXT NOT NULL,
  org_id               TEXT,
  project_id           TEXT,
  key_id               TEXT,
  endpoint             TEXT NOT NULL,
  model                TEXT NOT NULL,
  provider             TEXT,
  stream               INTEGER NOT NULL,
  status               TEXT NOT NULL,
  prompt_tokens        INTEGER NOT NULL,
  cached_input_tokens  INTEGER NOT NULL,
  completion_tokens    INTEGER NOT NULL,
  total_tokens         INTEGER NOT NULL,
  cost_nano            INTEGER NOT NULL,
  latency_ms           INTEGER NOT NULL,
  ttft_ms              INTEGER,
  cache_hit            INTEGER NOT NULL DEFAULT 0,
  saved_nano           INTEGER NOT NULL DEFAULT 0,
  attempts             TEXT NOT NULL DEFAULT '[]',
  dropped_params       TEXT NOT NULL DEFAULT '[]',
  cache_write_tokens   INTEGER NOT NULL DEFAULT 0,
  images               INTEGER NOT NULL DEFAULT 0,
  cost_detail          TEXT
);

-- Every usage record, those still in the journal included: for readers that cannot move the
-- journal first (a read-only connection, sqlite3 at a shell, `store migrate`). `*` is read when
-- the view is used, so columns added to both tables later come with it.
CREATE VIEW usage_records_all AS SELECT * FROM usage_records UNION ALL SELECT * FROM usage_journal;
