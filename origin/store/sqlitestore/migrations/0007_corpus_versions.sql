-- Each contentVersion's content (issue #35): the corpus's ContentDigest
-- the first time the origin served that version. A version's row is never
-- changed, so that a corpus declaring a version already served with other
-- content is refused at a reload and at a start (origin/corpus/follow):
-- clients re-pull only when the version moves. parts is the version's
-- subjects' and classes' digests (origin/changes.Version.Encode), which
-- the change feed (GET /v1/changes) compares; NULL once past the feed's
-- history (store.KeepVersions, store.KeepVersionsFor), counted from
-- pinned_at: the last time an origin pinned the version (served it).

CREATE TABLE corpus_versions (
	content_version TEXT PRIMARY KEY,
	content_digest  TEXT NOT NULL,
	recorded_at     TEXT NOT NULL,
	pinned_at       TEXT NOT NULL,
	parts           BLOB
) STRICT;

-- The corpus record's announcement (origin/corpus/follow, content.changed):
-- the version last announced and the record's loaded_at it was announced
-- for. A record whose loaded_at is not announced_for is a change not yet
-- announced, whatever origin (or release) recorded it.
ALTER TABLE corpus ADD COLUMN announced_version TEXT;
ALTER TABLE corpus ADD COLUMN announced_for TEXT;
