-- The meters (spec: Limits, meters table) and the enumeration alarm's
-- per-day record. meter is the spec's meter name; period is "2006-01" for
-- monthly meters and "2006-01-02T15" for hourly ones (UTC), which also
-- tells the two "calls" meters apart. A day's lessons read are one bitset
-- (bit i = lesson ordinal i) with its popcount n and the corpus version
-- it counts under.

CREATE TABLE meter_counters (
	org    TEXT NOT NULL,
	period TEXT NOT NULL,
	meter  TEXT NOT NULL,
	n      INTEGER NOT NULL,
	PRIMARY KEY (org, period, meter)
) STRICT, WITHOUT ROWID;

CREATE TABLE meter_reads (
	org     TEXT NOT NULL,
	day     TEXT NOT NULL, -- "2006-01-02", UTC
	version TEXT NOT NULL,
	bits    BLOB NOT NULL,
	n       INTEGER NOT NULL,
	PRIMARY KEY (org, day)
) STRICT;
