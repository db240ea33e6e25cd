-- The test clock's offset (origin/clock, LECTERN_TEST_CLOCK=1), kept so it
-- survives a restart and every origin on the database shares it: one row,
-- nanoseconds ahead of the wall clock.

CREATE TABLE test_clock (
	id        integer PRIMARY KEY CHECK (id = 1),
	offset_ns bigint NOT NULL CHECK (offset_ns >= 0)
);
