-- What a call's charge is made of: its cache writes (counted in prompt_tokens, billed at the
-- cache write rates), the images it generated, and its cost by part, a JSON object of nano-dollar
-- integers {input, cached_input, cache_write, output, images, per_request, tool_call, tier}
-- summing to cost_nano (tier: the above_input_tokens of the long-context tier billed at, or
-- null). Records written before have no parts: cost_detail NULL.
ALTER TABLE usage_records ADD COLUMN cache_write_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage_records ADD COLUMN images INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage_records ADD COLUMN cost_detail TEXT;
