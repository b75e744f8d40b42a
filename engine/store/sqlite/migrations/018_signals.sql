-- Tags a call carried ({prefix}Tags, metadata.tags): a JSON array of strings, [] for a call with
-- none and for the records written before they were kept. In both tables (a test holds them equal).
ALTER TABLE usage_records ADD COLUMN tags TEXT NOT NULL DEFAULT '[]';
ALTER TABLE usage_journal ADD COLUMN tags TEXT NOT NULL DEFAULT '[]';

-- The alerts' outbox: one row per event and webhook, written before it is sent. `crossing` names
-- what raised it (a threshold of a window, a balance episode, a key's expiry notice, a provider's
-- breaker episode): the unique pair makes a crossing raised once by every process sharing the
-- store. A sender claims a due row (claimed_until) before it sends it, and records the answer.
CREATE TABLE alert_deliveries (
  id             TEXT PRIMARY KEY,
  crossing       TEXT NOT NULL,
  webhook        TEXT NOT NULL,
  type           TEXT NOT NULL,
  payload        TEXT NOT NULL,
  created_at     INTEGER NOT NULL,
  status         TEXT NOT NULL,
  attempts       INTEGER NOT NULL DEFAULT 0,
  next_at        INTEGER NOT NULL,
  claimed_until  INTEGER NOT NULL DEFAULT 0,
  last_status    INTEGER,
  last_error     TEXT,
  delivered_at   INTEGER,
  UNIQUE (crossing, webhook)
);
CREATE INDEX alert_deliveries_due ON alert_deliveries(status, next_at);
CREATE INDEX alert_deliveries_time ON alert_deliveries(created_at, id);

-- What the alerts last said of a subject (a provider: up or down), and how many times it changed:
-- a change is raised once, by the process whose write made it.
CREATE TABLE alert_state (
  subject  TEXT PRIMARY KEY,
  state    TEXT NOT NULL,
  episode  INTEGER NOT NULL
);
