-- The response cache plugin's answers, shared by the workers on this file. `seq` orders them by
-- when they were stored (a replaced answer is stored anew), so the oldest go first when the
-- cache is full; response_cache_size keeps their number.
CREATE TABLE response_cache (
  seq         INTEGER PRIMARY KEY,
  key         TEXT NOT NULL UNIQUE,
  value       TEXT NOT NULL,
  stored_at   INTEGER NOT NULL,
  expires_at  INTEGER NOT NULL
);
CREATE INDEX response_cache_expiry ON response_cache(expires_at);

CREATE TABLE response_cache_size (
  id  INTEGER PRIMARY KEY CHECK (id = 1),
  n   INTEGER NOT NULL
);
INSERT INTO response_cache_size (id, n) VALUES (1, 0);
CREATE TRIGGER response_cache_added AFTER INSERT ON response_cache BEGIN UPDATE response_cache_size SET n = n + 1; END;
CREATE TRIGGER response_cache_removed AFTER DELETE ON response_cache BEGIN UPDATE response_cache_size SET n = n - 1; END;

-- An answer being fetched by one call for the identical calls that wait for it; `waiters`
-- counts those of other workers, which are told when the fill ends.
CREATE TABLE response_cache_fills (
  key         TEXT PRIMARY KEY,
  owner       TEXT NOT NULL,
  expires_at  INTEGER NOT NULL,
  waiters     INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
