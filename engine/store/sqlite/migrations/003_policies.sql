-- Admission policies' shared state, so that every worker of one machine sees the same counts.

-- Idempotency-Key per API key.
CREATE TABLE idempotency_keys (
  scope       TEXT NOT NULL,                 -- the API key id (or "anonymous")
  idem_key    TEXT NOT NULL,
  state       TEXT NOT NULL,                 -- in_flight | done
  trace_id    TEXT NOT NULL,
  created_at  INTEGER NOT NULL,
  expires_at  INTEGER NOT NULL,
  PRIMARY KEY (scope, idem_key)
) WITHOUT ROWID;
CREATE INDEX idempotency_expiry ON idempotency_keys(expires_at);

-- Fixed-window counters of the IP rate limit.
CREATE TABLE rate_limits (
  key       TEXT PRIMARY KEY,
  count     INTEGER NOT NULL,
  reset_at  INTEGER NOT NULL
) WITHOUT ROWID;

-- Settled usage per quota scope and UTC window.
CREATE TABLE quota_usage (
  scope         TEXT NOT NULL,               -- org:<org> | project:<org>/<project>
  window_start  INTEGER NOT NULL,            -- ms, UTC
  tokens        INTEGER NOT NULL DEFAULT 0,
  cost_nano     INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (scope, window_start)
) WITHOUT ROWID;

-- Open balance holds (the ledger): released on settle or failure; stale ones swept at start.
CREATE TABLE holds (
  id          TEXT PRIMARY KEY,
  org_id      TEXT NOT NULL REFERENCES organizations(id),
  amount_nano INTEGER NOT NULL,
  created_at  INTEGER NOT NULL
);
CREATE INDEX holds_org ON holds(org_id);
