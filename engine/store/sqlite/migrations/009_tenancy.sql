-- Tenants at runtime. Quotas live with the organizations and projects they limit (set from the
-- config or through the admin API, as JSON {tokens|usd, per}); a deleted organization or project
-- keeps its row, since its usage records name it, and is gone from every read.
ALTER TABLE organizations ADD COLUMN quota TEXT;
ALTER TABLE organizations ADD COLUMN deleted_at INTEGER;
ALTER TABLE projects ADD COLUMN quota TEXT;
ALTER TABLE projects ADD COLUMN deleted_at INTEGER;

-- Keys with a lifecycle: an expiry (a rotated key's grace ends there), calls and tokens per
-- minute, a budget in nano-dollars per UTC window, when the key was last used (written behind),
-- the key a rotation replaced, and the first key of its rotation line, under whose id limits and
-- budget are counted.
ALTER TABLE api_keys ADD COLUMN expires_at INTEGER;
ALTER TABLE api_keys ADD COLUMN rpm INTEGER;
ALTER TABLE api_keys ADD COLUMN tpm INTEGER;
ALTER TABLE api_keys ADD COLUMN budget_nano INTEGER;
ALTER TABLE api_keys ADD COLUMN budget_per TEXT;
ALTER TABLE api_keys ADD COLUMN last_used_at INTEGER;
ALTER TABLE api_keys ADD COLUMN replaces TEXT;
ALTER TABLE api_keys ADD COLUMN lineage TEXT;

-- Revocations are no longer polled from this table: every change is in tenancy_changes.
DROP INDEX api_keys_revoked;

-- Every change made through the admin API or the CLI. Never a secret: key ids, not keys.
CREATE TABLE audit_log (
  id      TEXT PRIMARY KEY,
  at      INTEGER NOT NULL,             -- ms since epoch
  action  TEXT NOT NULL,                -- org.create, key.rotate, credits.add, reload, ...
  target  TEXT NOT NULL,                -- an org, org/project or key id
  actor   TEXT NOT NULL,                -- admin | cli
  detail  TEXT NOT NULL                 -- JSON
);
CREATE INDEX audit_time ON audit_log(at, id);

-- Tenancy changes in commit order, read every 500 ms by the serving processes (a CLI command on
-- the same file is on no bus with them); swept after a day.
CREATE TABLE tenancy_changes (
  seq     INTEGER PRIMARY KEY AUTOINCREMENT,
  at      INTEGER NOT NULL,
  origin  TEXT NOT NULL,                -- the store connection that made it
  change  TEXT NOT NULL                 -- JSON {kind, id, org}
);

-- A key's records (the usage list and summary filtered by key_id).
CREATE INDEX usage_key_time ON usage_records(key_id, created_at, id);
