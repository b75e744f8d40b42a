-- The objects made at a provider through pass-through (files, uploads, batches, vector stores...),
-- by the organization and project that made them: a call reaches an object of a provider's
-- account only when its organization made it. Ids are the provider's, unique per provider.
CREATE TABLE passthrough_objects (
  provider    TEXT NOT NULL,
  id          TEXT NOT NULL,
  kind        TEXT NOT NULL,
  org_id      TEXT NOT NULL,
  project_id  TEXT NOT NULL,
  created_at  BIGINT NOT NULL,
  PRIMARY KEY (provider, id)
);
