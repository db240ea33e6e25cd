-- The enumeration alarm (issue #14). A day's record of lessons read is kept
-- by lesson id ("<tier>/<slug>/<classNum>", stable across corpus versions):
-- a row per org, day and lesson, and a row per org and day with their
-- count, which a batch locks like a counter. The alarm is a row per org,
-- which every batch locks first (inserting it when missing) and then
-- reads, so an op is evaluated against every alarm committed before it;
-- the read that trips it writes it in its own transaction. in_force holds
-- until an operator lifts it; day, tripped_at, lessons and granted are
-- what that read saw (day '' and tripped_at NULL: never tripped). The
-- per-version bitsets are dropped: a day's count in flight at the upgrade
-- restarts from zero.

DROP TABLE meter_reads;

CREATE TABLE meter_days (
	org text    NOT NULL,
	day text    NOT NULL, -- "2006-01-02", UTC
	n   integer NOT NULL,
	PRIMARY KEY (org, day)
);

CREATE TABLE meter_lessons_read (
	org    text NOT NULL,
	day    text NOT NULL,
	lesson text NOT NULL,
	PRIMARY KEY (org, day, lesson)
);

CREATE TABLE meter_alarms (
	org        text        PRIMARY KEY,
	in_force   boolean     NOT NULL DEFAULT false,
	day        text        NOT NULL DEFAULT '',
	tripped_at timestamptz,
	lessons    integer     NOT NULL DEFAULT 0,
	granted    integer     NOT NULL DEFAULT 0
);
