-- The deployment's corpus (issue #14): the directory the last corpus
-- reload loaded and the contentVersion it held, so that a restart serves
-- it rather than going back to LECTERN_CORPUS. One row.

CREATE TABLE corpus (
	id              INTEGER PRIMARY KEY CHECK (id = 1),
	dir             TEXT NOT NULL,
	content_version TEXT NOT NULL,
	loaded_at       TEXT NOT NULL
) STRICT;
