-- Organizations, projects and API keys. Money is INTEGER nano-dollars (1e-9 USD).
CREATE TABLE organizations (
  id            TEXT PRIMARY KEY,
  balance_nano  INTEGER NOT NULL DEFAULT 0,
  held_nano     INTEGER NOT NULL DEFAULT 0,
  spent_nano    INTEGER NOT NULL DEFAULT 0,
  created_at    INTEGER NOT NULL
);

CREATE TABLE projects (
  org_id      TEXT NOT NULL REFERENCES organizations(id),
  id          TEXT NOT NULL,
  created_at  INTEGER NOT NULL,
  PRIMARY KEY (org_id, id)
);

CREATE TABLE api_keys (
  id          TEXT PRIMARY KEY,
  hash        TEXT NOT NULL UNIQUE,          -- SHA-256 of the key, hex; the key itself is never stored
  hint        TEXT NOT NULL,                 -- the first characters, to recognise a key in listings
  org_id      TEXT NOT NULL,
  project_id  TEXT NOT NULL,
  name        TEXT NOT NULL DEFAULT '',
  models      TEXT NOT NULL DEFAULT '["*"]', -- JSON array of globs
  source      TEXT NOT NULL,                 -- config | cli | admin
  created_at  INTEGER NOT NULL,
  revoked_at  INTEGER,
  FOREIGN KEY (org_id, project_id) REFERENCES projects(org_id, id)
);
CREATE INDEX api_keys_project ON api_keys(org_id, project_id);
