-- Calls refused once their key was known are usage records too (status 'refused'), with the
-- refusal's error code here; NULL for every other record. The journal keeps the same columns.
ALTER TABLE usage_records ADD COLUMN error TEXT;
ALTER TABLE usage_journal ADD COLUMN error TEXT;
