-- Learner progress (issue #17, origin/progress): one row per organisation
-- and learner. version moves by one with every saved write (the compare
-- and swap of progress.Store.SaveProgress); record is the JSON document
-- of progress.Encode (classes in listing order, streak), kept as text so
-- it reads back byte for byte. The rows go with their organisation (ON
-- DELETE CASCADE), so an organisation created again under a deleted
-- one's id starts with no progress.

CREATE TABLE progress (
	org_id  text NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
	learner text NOT NULL,
	version bigint NOT NULL CHECK (version > 0),
	record  text NOT NULL,
	PRIMARY KEY (org_id, learner)
);
