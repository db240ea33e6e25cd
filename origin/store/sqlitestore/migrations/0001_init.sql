-- Organisations, their OAuth clients, the identity provider's signing keys
-- and pending authorization codes. Times are UTC text with microseconds
-- (see sqlitestore.go: timeLayout), fixed width so they sort; lists are
-- JSON arrays.

CREATE TABLE orgs (
	id                    TEXT PRIMARY KEY,
	name                  TEXT NOT NULL,
	tier                  TEXT NOT NULL,
	status                TEXT NOT NULL,
	grants                TEXT NOT NULL,
	quota_calls           INTEGER, -- NULL: no cap
	quota_downloads       INTEGER,
	quota_exports         INTEGER,
	quota_testprep_items  INTEGER,
	calls_per_hour        INTEGER,
	lesson_reads_per_hour INTEGER,
	url_mints_per_hour    INTEGER,
	ecla_version          INTEGER NOT NULL,
	required_ecla_version INTEGER NOT NULL,
	renews_at             TEXT NOT NULL,
	long_urls             INTEGER NOT NULL,
	created_at            TEXT NOT NULL,
	updated_at            TEXT NOT NULL
) STRICT;

CREATE TABLE clients (
	id            TEXT PRIMARY KEY,
	org_id        TEXT NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
	secret_hash   BLOB NOT NULL,
	scopes        TEXT NOT NULL,
	grant_types   TEXT NOT NULL,
	redirect_uris TEXT NOT NULL,
	created_at    TEXT NOT NULL
) STRICT;

CREATE INDEX clients_org_id ON clients (org_id);

CREATE TABLE signing_keys (
	kid        TEXT PRIMARY KEY,
	alg        TEXT NOT NULL,
	private    BLOB NOT NULL,
	created_at TEXT NOT NULL
) STRICT;

CREATE TABLE auth_codes (
	code_hash    TEXT PRIMARY KEY,
	client_id    TEXT NOT NULL,
	redirect_uri TEXT NOT NULL,
	scope        TEXT NOT NULL,
	challenge    TEXT NOT NULL,
	learner      TEXT NOT NULL,
	expires_at   TEXT NOT NULL
) STRICT;

CREATE INDEX auth_codes_expires_at ON auth_codes (expires_at);
