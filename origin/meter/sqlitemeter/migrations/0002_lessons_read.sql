-- The enumeration alarm (issue #14). A day's record of lessons read is kept
-- by lesson id ("<tier>/<slug>/<classNum>", stable across corpus versions):
-- a row per org, day and lesson, and the day's count of them. The alarm is
-- a row per org, written in the transaction of the read that trips it:
-- in_force until an operator lifts it; day, tripped_at (RFC 3339, UTC),
-- lessons and granted are what that read saw. The per-version bitsets are
-- dropped: a day's count in flight at the upgrade restarts from zero.

DROP TABLE meter_reads;

CREATE TABLE meter_days (
	org TEXT    NOT NULL,
	day TEXT    NOT NULL, -- "2006-01-02", UTC
	n   INTEGER NOT NULL,
	PRIMARY KEY (org, day)
) STRICT, WITHOUT ROWID;

CREATE TABLE meter_lessons_read (
	org    TEXT NOT NULL,
	day    TEXT NOT NULL,
	lesson TEXT NOT NULL,
	PRIMARY KEY (org, day, lesson)
) STRICT, WITHOUT ROWID;

CREATE TABLE meter_alarms (
	org        TEXT    NOT NULL PRIMARY KEY,
	in_force   INTEGER NOT NULL,
	day        TEXT    NOT NULL,
	tripped_at TEXT    NOT NULL,
	lessons    INTEGER NOT NULL,
	granted    INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
