-- Who made a change through the admin API: {"kind":"sso","sub","email"} or {"kind":"token","name"}
-- (JSON); NULL for the CLI, the config file, and changes written before it was kept.
ALTER TABLE audit_log ADD COLUMN identity TEXT;

-- Operators signed in through single sign-on. The id is the SHA-256 of the cookie's value: the
-- table holds nothing a browser could present.
CREATE TABLE sessions (
  id_hash     TEXT PRIMARY KEY,
  sub         TEXT NOT NULL,            -- the identity provider's subject
  email       TEXT,
  name        TEXT,
  role        TEXT NOT NULL,            -- admin | viewer | org_admin
  org_id      TEXT,                     -- org_admin's organization
  csrf        TEXT NOT NULL,            -- the token every state-changing call must carry
  created_at  BIGINT NOT NULL,          -- ms since epoch
  expires_at  BIGINT NOT NULL
);
CREATE INDEX sessions_sub ON sessions(sub);
CREATE INDEX sessions_expiry ON sessions(expires_at);

-- (Sign-ins under way live in Redis, each for ten minutes at most, taken once.)
