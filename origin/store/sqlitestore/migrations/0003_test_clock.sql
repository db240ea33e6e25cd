-- The test clock's offset (origin/clock, LECTERN_TEST_CLOCK=1), kept so it
-- survives a restart: one row, nanoseconds ahead of the wall clock.

CREATE TABLE test_clock (
	id        INTEGER PRIMARY KEY CHECK (id = 1),
	offset_ns INTEGER NOT NULL CHECK (offset_ns >= 0)
) STRICT;
