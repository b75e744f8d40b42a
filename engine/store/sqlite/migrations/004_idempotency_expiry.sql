-- An idempotency key's row says only until when it refuses a repeat (plugins/idempotency.ts
-- sets the expiry when the key is taken and moves it only for a call that outlasts the slack);
-- whether the call is still in flight was never read.
ALTER TABLE idempotency_keys DROP COLUMN state;
