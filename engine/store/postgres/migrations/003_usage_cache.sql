-- A call answered from a response cache: no provider reached, no cost, and what it would have
-- cost at the model's prices then.
ALTER TABLE usage_records ADD COLUMN cache_hit INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage_records ADD COLUMN saved_nano BIGINT NOT NULL DEFAULT 0;
