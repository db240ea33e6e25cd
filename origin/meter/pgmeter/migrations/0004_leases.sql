-- Edge leases (issue #19, meter.LeaseStore): a row per lease granted,
-- written in the transaction of its grant, which holds its org's alarm
-- row lock, as does every batch that reads or writes the org's leases:
-- so a batch sees every lease of its orgs committed before it. used and
-- closed are as its reports left them; month and hour are the periods of
-- its grant, which its usage is billed in; month_limit and hour_limit the
-- calls quota and callsPerHour at its grant (NULL: no cap), which bound
-- what a report after settle bills. Closed rows stay (as counters of past
-- periods do).
--
-- meter_lease_epochs: an org's lease epoch, and under org '' the global
-- one; Epoch(org) is the sum of the two. A batch with grants holds its
-- orgs' rows and the global one FOR SHARE until it commits, so a bump
-- (an UPDATE) commits either before the grant reads it or after the
-- grant's lease is committed, and listed by OpenLeases.

CREATE TABLE meter_leases (
	id          text        PRIMARY KEY,
	org         text        NOT NULL,
	epoch       bigint      NOT NULL,
	calls       bigint      NOT NULL,
	used        bigint      NOT NULL,
	month       text        NOT NULL,
	hour        text        NOT NULL,
	expires     timestamptz NOT NULL,
	settle      timestamptz NOT NULL,
	revoke_url  text        NOT NULL,
	closed      boolean     NOT NULL,
	month_limit bigint,
	hour_limit  bigint
);

CREATE INDEX meter_leases_open ON meter_leases (org, settle) WHERE NOT closed;

CREATE TABLE meter_lease_epochs (
	org text   PRIMARY KEY,
	n   bigint NOT NULL
);

INSERT INTO meter_lease_epochs (org, n) VALUES ('', 0);
