-- The meters (spec: Limits, meters table) and the enumeration alarm's
-- per-day record. meter is the spec's meter name; period is "2006-01" for
-- monthly meters and "2006-01-02T15" for hourly ones (UTC), which also
-- tells the two "calls" meters apart. A day's lessons read are one bitset
-- (bit i = lesson ordinal i) with its popcount n and the corpus version
-- it counts under.

CREATE TABLE meter_counters (
	org    text   NOT NULL,
	period text   NOT NULL,
	meter  text   NOT NULL,
	n      bigint NOT NULL,
	PRIMARY KEY (org, period, meter)
);

CREATE TABLE meter_reads (
	org     text    NOT NULL,
	day     text    NOT NULL, -- "2006-01-02", UTC
	version text    NOT NULL,
	bits    bytea   NOT NULL,
	n       integer NOT NULL,
	PRIMARY KEY (org, day)
);
