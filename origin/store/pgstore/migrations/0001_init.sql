-- Organisations, their OAuth clients, the identity provider's signing keys
-- and pending authorization codes. Lists are text[], never NULL; a NULL
-- limit means no cap.

CREATE TABLE orgs (
	id                    text PRIMARY KEY,
	name                  text NOT NULL,
	tier                  text NOT NULL,
	status                text NOT NULL,
	grants                text[] NOT NULL,
	quota_calls           bigint,
	quota_downloads       bigint,
	quota_exports         bigint,
	quota_testprep_items  bigint,
	calls_per_hour        bigint,
	lesson_reads_per_hour bigint,
	url_mints_per_hour    bigint,
	ecla_version          bigint NOT NULL,
	required_ecla_version bigint NOT NULL,
	renews_at             timestamptz NOT NULL,
	long_urls             boolean NOT NULL,
	created_at            timestamptz NOT NULL,
	updated_at            timestamptz NOT NULL
);

CREATE TABLE clients (
	id            text PRIMARY KEY,
	org_id        text NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
	secret_hash   bytea NOT NULL,
	scopes        text[] NOT NULL,
	grant_types   text[] NOT NULL,
	redirect_uris text[] NOT NULL,
	created_at    timestamptz NOT NULL
);

CREATE INDEX clients_org_id ON clients (org_id);

CREATE TABLE signing_keys (
	kid        text PRIMARY KEY,
	alg        text NOT NULL,
	private    bytea NOT NULL,
	created_at timestamptz NOT NULL
);

CREATE TABLE auth_codes (
	code_hash    text PRIMARY KEY,
	client_id    text NOT NULL,
	redirect_uri text NOT NULL,
	scope        text NOT NULL,
	challenge    text NOT NULL,
	learner      text NOT NULL,
	expires_at   timestamptz NOT NULL
);

CREATE INDEX auth_codes_expires_at ON auth_codes (expires_at);
