-- The model a call named, when another answered it (an alias, a fallback): `model` is the model
-- that answered and is charged for; NULL when the call was answered by the model it named. And
-- the chain: the models tried that could not answer, and why ([{model, why}]).
ALTER TABLE usage_records ADD COLUMN requested_model TEXT;
ALTER TABLE usage_records ADD COLUMN fallbacks JSONB DEFAULT '[]'::jsonb;

-- The end-of-call batch of migration 014, which now writes requested_model and fallbacks too; the rest is unchanged.
--   leases   [[lease id, organization, amount released], ...]
--   charges  [[organization, charge], ...]
--   quotas   [[scope, window start, tokens, cost], ...]
--   touches  [[key id, last used at], ...]
--   usage    [usage record, ...] (objects named by column)
--   contents [{usage_id, created_at, request, response}, ...]
CREATE OR REPLACE FUNCTION modelgate_end_batch(p JSONB) RETURNS TABLE (q_scope TEXT, q_window BIGINT, q_tokens BIGINT, q_cost BIGINT) AS $$
BEGIN
  -- organizations first, in id order, as refills and releases lock them: no deadlock
  PERFORM 1 FROM organizations WHERE id IN (
      SELECT x->>1 FROM jsonb_array_elements(p->'leases') x
      UNION SELECT x->>0 FROM jsonb_array_elements(p->'charges') x)
    ORDER BY id FOR UPDATE;

  -- Leases shrink by what their calls took and what is given back, never below zero: a lease row
  -- already released (its instance was taken for dead) releases nothing more, and its calls'
  -- charges still apply. Every charge is capped at the balance; what exceeds it is uncollected.
  WITH l AS (SELECT x->>0 AS id, (x->>2)::BIGINT AS released FROM jsonb_array_elements(p->'leases') x),
    old AS (SELECT h.id, h.org_id, h.amount_nano AS amount, LEAST(l.released, h.amount_nano) AS released FROM holds h JOIN l ON l.id = h.id FOR UPDATE OF h),
    shrunk AS (UPDATE holds h SET amount_nano = old.amount - old.released FROM old WHERE h.id = old.id AND old.amount > old.released),
    gone AS (DELETE FROM holds h USING old WHERE h.id = old.id AND old.amount <= old.released),
    per AS (SELECT org, sum(released) AS released, sum(charge) AS charge FROM (
        SELECT org_id AS org, released, 0::BIGINT AS charge FROM old
        UNION ALL SELECT x->>0, 0::BIGINT, (x->>1)::BIGINT FROM jsonb_array_elements(p->'charges') x) y GROUP BY org)
  UPDATE organizations o SET held_nano = o.held_nano - per.released,
    balance_nano = o.balance_nano - LEAST(per.charge, o.balance_nano), spent_nano = o.spent_nano + LEAST(per.charge, o.balance_nano),
    uncollected_nano = o.uncollected_nano + GREATEST(per.charge - o.balance_nano, 0)
  FROM per WHERE o.id = per.org;

  -- rows in key order, so that two instances' batches lock shared rows in the same order
  RETURN QUERY WITH counted AS (
    INSERT INTO quota_usage AS u (scope, window_start, tokens, cost_nano)
    SELECT x->>0, (x->>1)::BIGINT, (x->>2)::BIGINT, (x->>3)::BIGINT FROM jsonb_array_elements(p->'quotas') x ORDER BY 1, 2
    ON CONFLICT (scope, window_start) DO UPDATE SET tokens = u.tokens + EXCLUDED.tokens, cost_nano = u.cost_nano + EXCLUDED.cost_nano
    RETURNING u.scope, u.window_start, u.tokens, u.cost_nano)
  SELECT * FROM counted;

  UPDATE api_keys k SET last_used_at = t.at
  FROM (SELECT x->>0 AS id, (x->>1)::BIGINT AS at FROM jsonb_array_elements(p->'touches') x ORDER BY 1) t
  WHERE k.id = t.id AND (k.last_used_at IS NULL OR k.last_used_at < t.at);

  -- a record without attempts or dropped parameters (written by an older instance) gets [], one
  -- without cache writes or images 0, one without a cost by part, an error or a requested model NULL, one without fallbacks []
  INSERT INTO usage_records (id, created_at, trace_id, org_id, project_id, key_id, endpoint, model, provider, stream, status,
      prompt_tokens, cached_input_tokens, completion_tokens, total_tokens, cost_nano, latency_ms, ttft_ms, cache_hit, saved_nano,
      attempts, dropped_params, cache_write_tokens, images, cost_detail, error, tags, requested_model, fallbacks)
    SELECT id, created_at, trace_id, org_id, project_id, key_id, endpoint, model, provider, stream, status,
      prompt_tokens, cached_input_tokens, completion_tokens, total_tokens, cost_nano, latency_ms, ttft_ms, cache_hit, saved_nano,
      coalesce(attempts, '[]'::jsonb), coalesce(dropped_params, '[]'::jsonb), coalesce(cache_write_tokens, 0), coalesce(images, 0), cost_detail, error, coalesce(tags, '[]'::jsonb), requested_model, coalesce(fallbacks, '[]'::jsonb)
    FROM jsonb_populate_recordset(NULL::usage_records, p->'usage');

  INSERT INTO usage_content (usage_id, created_at, request, response)
    SELECT usage_id, created_at, request, response FROM jsonb_populate_recordset(NULL::usage_content, p->'contents');
END
$$ LANGUAGE plpgsql;
