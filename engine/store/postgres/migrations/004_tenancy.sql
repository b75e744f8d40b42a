-- Tenants at runtime. Quotas live with the organizations and projects they limit (set from the
-- config or through the admin API, as JSON {tokens|usd, per}); a deleted organization or project
-- keeps its row, since its usage records name it, and is gone from every read.
ALTER TABLE organizations ADD COLUMN quota TEXT;
ALTER TABLE organizations ADD COLUMN deleted_at BIGINT;
ALTER TABLE projects ADD COLUMN quota TEXT;
ALTER TABLE projects ADD COLUMN deleted_at BIGINT;

-- Keys with a lifecycle: an expiry (a rotated key's grace ends there), calls and tokens per
-- minute, a budget in nano-dollars per UTC window, when the key was last used (written behind),
-- the key a rotation replaced, and the first key of its rotation line, under whose id limits and
-- budget are counted.
ALTER TABLE api_keys ADD COLUMN expires_at BIGINT;
ALTER TABLE api_keys ADD COLUMN rpm INTEGER;
ALTER TABLE api_keys ADD COLUMN tpm INTEGER;
ALTER TABLE api_keys ADD COLUMN budget_nano BIGINT;
ALTER TABLE api_keys ADD COLUMN budget_per TEXT;
ALTER TABLE api_keys ADD COLUMN last_used_at BIGINT;
ALTER TABLE api_keys ADD COLUMN replaces TEXT;
ALTER TABLE api_keys ADD COLUMN lineage TEXT;

-- Every change made through the admin API or the CLI. Never a secret: key ids, not keys.
CREATE TABLE audit_log (
  id      TEXT PRIMARY KEY,
  at      BIGINT NOT NULL,
  action  TEXT NOT NULL,
  target  TEXT NOT NULL,
  actor   TEXT NOT NULL,
  detail  TEXT NOT NULL
);
CREATE INDEX audit_time ON audit_log(at, id);

-- A key's records (the usage list and summary filtered by key_id).
CREATE INDEX usage_key_time ON usage_records(key_id, created_at, id);
