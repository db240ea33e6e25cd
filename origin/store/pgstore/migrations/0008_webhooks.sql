-- Webhooks (issue #37, point 3): each organisation's endpoints, and the
-- outbox they are delivered from (origin/webhook). A secret is sealed
-- (AES-256-GCM under a key derived from the deployment secret), never
-- stored in the clear: the origin signs with it. An event is written
-- with one delivery per subscribed endpoint in one transaction; origins
-- claim due deliveries with FOR UPDATE SKIP LOCKED, a claim moving
-- next_at to the end of its lease, so a claim whose origin died falls due
-- again by itself. Events are pruned once their deliveries are finished
-- and the retention passed.

CREATE TABLE webhook_endpoints (
	id              text PRIMARY KEY,
	org_id          text NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
	url             text NOT NULL,
	events          text[] NOT NULL,
	secret          bytea NOT NULL,
	previous_secret bytea,
	previous_until  timestamptz,
	disabled_at     timestamptz,
	disabled_reason text NOT NULL DEFAULT '',
	created_at      timestamptz NOT NULL
);

CREATE INDEX webhook_endpoints_org_id ON webhook_endpoints (org_id, created_at);

CREATE TABLE webhook_events (
	id         text PRIMARY KEY,
	org_id     text NOT NULL,
	type       text NOT NULL,
	payload    bytea NOT NULL,
	created_at timestamptz NOT NULL
);

CREATE INDEX webhook_events_created_at ON webhook_events (created_at);

CREATE TABLE webhook_deliveries (
	id          bigserial PRIMARY KEY,
	event_id    text NOT NULL REFERENCES webhook_events (id) ON DELETE CASCADE,
	endpoint_id text NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
	state       text NOT NULL, -- pending, delivered, failed, cancelled
	attempts    integer NOT NULL DEFAULT 0,
	next_at     timestamptz NOT NULL,
	claim       text NOT NULL DEFAULT '',
	last_status integer NOT NULL DEFAULT 0,
	last_error  text NOT NULL DEFAULT '',
	last_at     timestamptz,
	finished_at timestamptz,
	created_at  timestamptz NOT NULL,
	UNIQUE (event_id, endpoint_id)
);

CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_at) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, id);
