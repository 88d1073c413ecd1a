-- A source's role was assumed with an external id derived from its organization, so any
-- member able to create a base could name the organization's role and read its bucket.
-- Each source assuming a role now has an external id of its own: random, made by Sluice,
-- new whenever the role changes. Existing role sources get a new one here (244 random bits
-- from gen_random_uuid): their roles' trust policies must be updated to it, and until then
-- their runs fail naming the role and the id to require.
ALTER TABLE sync_sources ADD COLUMN external_id text;
UPDATE sync_sources
   SET external_id = 'sluice-' || replace(gen_random_uuid()::text, '-', '') || replace(gen_random_uuid()::text, '-', '')
 WHERE role_arn IS NOT NULL;
ALTER TABLE sync_sources ADD CONSTRAINT sync_sources_role_has_external_id
    CHECK (role_arn IS NULL OR external_id IS NOT NULL);
