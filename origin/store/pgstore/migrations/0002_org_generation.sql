-- An organisation's generation (store.Org.Generation): a random value
-- given at creation and never changed, so that an organisation created
-- again under a deleted one's id is told apart from it (issue #13: its
-- meters, enumeration count and tokens are not the new one's). Rows that
-- predate this migration keep '' (their meters stay keyed by the bare id).

ALTER TABLE orgs ADD COLUMN generation text NOT NULL DEFAULT '';
