-- The shared store of several gateway instances. Money is BIGINT nano-dollars (1e-9 USD); times
-- are BIGINT Unix milliseconds, as in the SQLite store.
CREATE TABLE organizations (
  id            TEXT PRIMARY KEY,
  balance_nano  BIGINT NOT NULL DEFAULT 0,
  held_nano     BIGINT NOT NULL DEFAULT 0,
  spent_nano    BIGINT NOT NULL DEFAULT 0,
  created_at    BIGINT NOT NULL,
  CHECK (held_nano >= 0 AND balance_nano >= 0)
);

CREATE TABLE projects (
  org_id      TEXT NOT NULL REFERENCES organizations(id),
  id          TEXT NOT NULL,
  created_at  BIGINT NOT NULL,
  PRIMARY KEY (org_id, id)
);

CREATE TABLE api_keys (
  id           TEXT PRIMARY KEY,
  hash         TEXT NOT NULL UNIQUE,
  hint         TEXT NOT NULL,
  org_id       TEXT NOT NULL,
  project_id   TEXT NOT NULL,
  name         TEXT NOT NULL DEFAULT '',
  models       TEXT NOT NULL DEFAULT '["*"]',
  passthrough  TEXT NOT NULL DEFAULT '[]',
  source       TEXT NOT NULL,
  created_at   BIGINT NOT NULL,
  revoked_at   BIGINT,
  FOREIGN KEY (org_id, project_id) REFERENCES projects(org_id, id)
);

-- One row per balance hold of a call in flight, tagged with the instance that took it.
CREATE TABLE holds (
  id          TEXT PRIMARY KEY,
  org_id      TEXT NOT NULL REFERENCES organizations(id),
  amount_nano BIGINT NOT NULL,
  holder      TEXT NOT NULL,
  created_at  BIGINT NOT NULL
);
CREATE INDEX holds_holder ON holds(holder);

-- Every instance beats a heartbeat here; the holds of one that went silent are released.
CREATE TABLE holders (
  id            TEXT PRIMARY KEY,
  heartbeat_at  BIGINT NOT NULL
);

CREATE TABLE quota_usage (
  scope         TEXT NOT NULL,
  window_start  BIGINT NOT NULL,
  tokens        BIGINT NOT NULL DEFAULT 0,
  cost_nano     BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY (scope, window_start)
);

CREATE TABLE usage_records (
  id                   TEXT PRIMARY KEY,
  created_at           BIGINT NOT NULL,
  trace_id             TEXT NOT NULL,
  org_id               TEXT,
  project_id           TEXT,
  key_id               TEXT,
  endpoint             TEXT NOT NULL,
  model                TEXT NOT NULL,
  provider             TEXT,
  stream               INTEGER NOT NULL,
  status               TEXT NOT NULL,
  prompt_tokens        BIGINT NOT NULL,
  cached_input_tokens  BIGINT NOT NULL,
  completion_tokens    BIGINT NOT NULL,
  total_tokens         BIGINT NOT NULL,
  cost_nano            BIGINT NOT NULL,
  latency_ms           DOUBLE PRECISION NOT NULL,
  ttft_ms              DOUBLE PRECISION
);
CREATE INDEX usage_org_time ON usage_records(org_id, created_at, id);
CREATE INDEX usage_project_time ON usage_records(org_id, project_id, created_at, id);
CREATE INDEX usage_time ON usage_records(created_at, id);

CREATE TABLE usage_content (
  usage_id    TEXT PRIMARY KEY,
  created_at  BIGINT NOT NULL,
  request     TEXT,
  response    TEXT
);
CREATE INDEX usage_content_time ON usage_content(created_at);
