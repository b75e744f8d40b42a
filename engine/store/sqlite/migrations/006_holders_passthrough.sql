-- Which process holds each lease, and when that process last said it is alive: the live
-- processes release the leases of one that stopped answering (killed, crashed) within a minute,
-- rather than at the next start.
CREATE TABLE holders (
  id            TEXT PRIMARY KEY,          -- one per store connection (process and a random part)
  heartbeat_at  INTEGER NOT NULL           -- ms since epoch
) WITHOUT ROWID;
ALTER TABLE holds ADD COLUMN holder TEXT;
CREATE INDEX holds_holder ON holds(holder);

-- The provider ids whose pass-through routes a key may use (JSON array).
ALTER TABLE api_keys ADD COLUMN passthrough TEXT NOT NULL DEFAULT '[]';

-- Revocations are polled by every worker, so each drops a revoked key from its cache at once.
CREATE INDEX api_keys_revoked ON api_keys(revoked_at) WHERE revoked_at IS NOT NULL;
