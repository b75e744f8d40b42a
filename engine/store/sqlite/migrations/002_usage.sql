-- One record per metered call (the admin API's UsageRecord). cost is INTEGER nano-dollars.
CREATE TABLE usage_records (
  id                   TEXT PRIMARY KEY,
  created_at           INTEGER NOT NULL,     -- ms since epoch, when the call started
  trace_id             TEXT NOT NULL,
  org_id               TEXT,
  project_id           TEXT,
  key_id               TEXT,
  endpoint             TEXT NOT NULL,        -- chat.completions | messages
  model                TEXT NOT NULL,
  provider             TEXT,
  stream               INTEGER NOT NULL,
  status               TEXT NOT NULL,        -- ok | client_aborted | upstream_error | timeout
  prompt_tokens        INTEGER NOT NULL,
  cached_input_tokens  INTEGER NOT NULL,
  completion_tokens    INTEGER NOT NULL,
  total_tokens         INTEGER NOT NULL,
  cost_nano            INTEGER NOT NULL,
  latency_ms           INTEGER NOT NULL,
  ttft_ms              INTEGER
);
CREATE INDEX usage_org_time ON usage_records(org_id, created_at DESC, id DESC);
CREATE INDEX usage_project_time ON usage_records(org_id, project_id, created_at DESC, id DESC);
CREATE INDEX usage_time ON usage_records(created_at DESC, id DESC);

-- Prompt and completion text, only when usage.store_content is on; swept after the retention.
CREATE TABLE usage_content (
  usage_id    TEXT PRIMARY KEY REFERENCES usage_records(id) ON DELETE CASCADE,
  created_at  INTEGER NOT NULL,
  request     TEXT,
  response    TEXT
);
CREATE INDEX usage_content_time ON usage_content(created_at);
