-- The export ledger (issue #16): a row per minted URL and per export that
-- ships, written in the transaction of the op that bills it. Ids number
-- the rows in commit order across every origin sharing the database: a
-- batch takes its ids from the one row of meter_ledger_seq, whose lock it
-- then holds until it commits, so a batch that commits later has higher
-- ids (a sequence would not: its values are handed out before commit).
-- org is the organisation's meter key; scopes are space-separated;
-- expires is NULL and key_id '' when no link was issued.

CREATE TABLE meter_ledger_seq (
	one  boolean PRIMARY KEY DEFAULT true CHECK (one),
	last bigint  NOT NULL
);

INSERT INTO meter_ledger_seq (one, last) VALUES (true, 0);

CREATE TABLE meter_ledger (
	id              bigint      PRIMARY KEY,
	org             text        NOT NULL,
	kind            text        NOT NULL,
	target          text        NOT NULL,
	format          text        NOT NULL,
	client          text        NOT NULL,
	scopes          text        NOT NULL,
	content_version text        NOT NULL,
	request_id      text        NOT NULL,
	created         timestamptz NOT NULL,
	expires         timestamptz,
	key_id          text        NOT NULL
);

CREATE INDEX meter_ledger_org ON meter_ledger (org, id);
