-- The organization an audit line is about, so that an org_admin reads its own organization's
-- lines, selected by the query (pages and cursors stay right). NULL: the gateway's own (a reload),
-- or a line that names none.
ALTER TABLE audit_log ADD COLUMN org_id TEXT;

-- The lines written before it was kept: from their target (an organization, org/project or key
-- id) or, for a sign-in, the organization of its role.
UPDATE audit_log SET org_id = target WHERE action IN ('org.create', 'org.update', 'org.delete', 'credits.add');
UPDATE audit_log SET org_id = split_part(target, '/', 1) WHERE action LIKE 'project.%' AND position('/' IN target) > 1;
UPDATE audit_log a SET org_id = k.org_id FROM api_keys k WHERE a.action LIKE 'key.%' AND k.id = a.target;
UPDATE audit_log SET org_id = (detail::jsonb) ->> 'org' WHERE action = 'session.start';

CREATE INDEX audit_org_time ON audit_log(org_id, at, id);

-- A session's ID token, sent back to the identity provider as id_token_hint when its user signs
-- out there too (RP-initiated logout); NULL for sessions made before it was kept.
ALTER TABLE sessions ADD COLUMN id_token TEXT;
