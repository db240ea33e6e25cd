-- The export ledger (issue #16): a row per minted URL and per export that
-- ships, written in the transaction of the op that bills it. id numbers
-- the rows in commit order (AUTOINCREMENT: never reused, and this Store is
-- the database's only writer, so a later commit has higher ids). org is
-- the organisation's meter key; scopes are space-separated; created and
-- expires are RFC 3339 UTC (expires '' when no link was issued); key_id
-- is '' then too.

CREATE TABLE meter_ledger (
	id              INTEGER PRIMARY KEY AUTOINCREMENT,
	org             TEXT NOT NULL,
	kind            TEXT NOT NULL,
	target          TEXT NOT NULL,
	format          TEXT NOT NULL,
	client          TEXT NOT NULL,
	scopes          TEXT NOT NULL,
	content_version TEXT NOT NULL,
	request_id      TEXT NOT NULL,
	created         TEXT NOT NULL,
	expires         TEXT NOT NULL,
	key_id          TEXT NOT NULL
) STRICT;

CREATE INDEX meter_ledger_org ON meter_ledger (org, id);
