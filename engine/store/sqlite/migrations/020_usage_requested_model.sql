-- The model a call named, when another answered it (an alias, a fallback): `model` is the model
-- that answered and is charged for; NULL when the call was answered by the model it named. And
-- the chain: the models tried that could not answer, and why, as JSON ([{model, why}]).
ALTER TABLE usage_records ADD COLUMN requested_model TEXT;
ALTER TABLE usage_records ADD COLUMN fallbacks TEXT DEFAULT '[]';
ALTER TABLE usage_journal ADD COLUMN requested_model TEXT;
ALTER TABLE usage_journal ADD COLUMN fallbacks TEXT DEFAULT '[]';
