-- Edge leases (issue #19, meter.LeaseStore): a row per lease granted,
-- written in the transaction of its grant; used and closed as its
-- reports left them. month and hour are the periods of its grant, which
-- its usage is billed in; expires and settle are unix microseconds;
-- month_limit and hour_limit the calls quota and callsPerHour at its
-- grant (NULL: no cap), which bound what a report after settle bills.
-- Closed rows stay (as counters of past periods do).
--
-- meter_lease_epochs: an org's lease epoch, and under org '' the global
-- one; Epoch(org) is the sum of the two.

CREATE TABLE meter_leases (
	id          TEXT    NOT NULL PRIMARY KEY,
	org         TEXT    NOT NULL,
	epoch       INTEGER NOT NULL,
	calls       INTEGER NOT NULL,
	used        INTEGER NOT NULL,
	month       TEXT    NOT NULL,
	hour        TEXT    NOT NULL,
	expires     INTEGER NOT NULL,
	settle      INTEGER NOT NULL,
	revoke_url  TEXT    NOT NULL,
	closed      INTEGER NOT NULL,
	month_limit INTEGER,
	hour_limit  INTEGER
) STRICT, WITHOUT ROWID;

CREATE INDEX meter_leases_open ON meter_leases (org, settle) WHERE closed = 0;

CREATE TABLE meter_lease_epochs (
	org TEXT    NOT NULL PRIMARY KEY,
	n   INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

INSERT INTO meter_lease_epochs (org, n) VALUES ('', 0);
