-- A tagged record wrote two entries of migration 021's partial indexes: each an index page more
-- in the call's commit, about 4 µs of a chat call's CPU apiece on a gateway whose calls carry
-- tags (bench/signals.ts). The one kept, usage_tagged_time, is what a query by tag over every
-- organization needs: without it such a query reads every record in its time range. A query by
-- tag within one organization reads that organization's records in the range instead
-- (usage_org_time), as a query by model or by provider does; SQLite may also walk the tagged
-- records' time index and keep that organization's.
DROP INDEX usage_tagged_org_time;
