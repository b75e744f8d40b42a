-- What a call charged beyond what its organization's balance held (the provider reported more
-- than the hold foresaw): never written off silently. A top-up pays it first.
ALTER TABLE organizations ADD COLUMN uncollected_nano INTEGER NOT NULL DEFAULT 0;
