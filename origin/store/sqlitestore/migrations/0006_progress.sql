-- Learner progress (issue #17, origin/progress): one row per organisation
-- and learner. version moves by one with every saved write (the compare
-- and swap of progress.Store.SaveProgress); record is the JSON document
-- of progress.Encode (classes in listing order, streak). The rows go
-- with their organisation (ON DELETE CASCADE), so an organisation created
-- again under a deleted one's id starts with no progress. A rowid table,
-- not WITHOUT ROWID: a record of many classes overflows a page, and
-- WITHOUT ROWID suits small rows only.

CREATE TABLE progress (
	org_id  TEXT NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
	learner TEXT NOT NULL,
	version INTEGER NOT NULL CHECK (version > 0),
	record  TEXT NOT NULL,
	PRIMARY KEY (org_id, learner)
) STRICT;
