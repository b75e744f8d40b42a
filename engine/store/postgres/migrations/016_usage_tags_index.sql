-- The tagged records' tags in a GIN index, for `GET /admin/v1/usage?tag=` (and the totals of a
-- tag): `tags @> '["team-a"]'` reads the records of that tag instead of every record in the
-- time range. Partial: a record without tags (most of them on a gateway whose clients send none)
-- costs the index nothing, and a query by tag says `tags <> '[]'` so that the planner may use it.
-- jsonb_path_ops: containment only, the one operator the store asks of it, in a smaller index.
CREATE INDEX usage_tags ON usage_records USING gin (tags jsonb_path_ops) WHERE tags <> '[]'::jsonb;
