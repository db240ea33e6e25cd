-- The deployment's corpus (issue #14): the directory the last corpus
-- reload loaded and the contentVersion it held. Every origin on the
-- database polls this one row and loads the directory when the version is
-- not its own, so a reload through any origin reaches all of them.

CREATE TABLE corpus (
	id              integer PRIMARY KEY CHECK (id = 1),
	dir             text NOT NULL,
	content_version text NOT NULL,
	loaded_at       timestamptz NOT NULL
);
