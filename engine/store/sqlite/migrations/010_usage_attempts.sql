-- What a usage record tells of its call besides its figures: every attempt at a provider (JSON
-- array of {provider, upstream_model, outcome, status, error, latency_ms}) and the client
-- parameters not sent on (JSON array of names). Records written before read as [].
ALTER TABLE usage_records ADD COLUMN attempts TEXT NOT NULL DEFAULT '[]';
ALTER TABLE usage_records ADD COLUMN dropped_params TEXT NOT NULL DEFAULT '[]';

-- The records of failed calls, newest first (the admin API's status filter). Partial: a call
-- that went well, nearly every call, writes nothing to it.
CREATE INDEX usage_failed_time ON usage_records(created_at, id) WHERE status <> 'ok';
