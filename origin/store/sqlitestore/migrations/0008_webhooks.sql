-- Webhooks (issue #37, point 3): each organisation's endpoints, and the
-- outbox they are delivered from (origin/webhook). A secret is sealed
-- (AES-256-GCM under a key derived from the deployment secret), never
-- stored in the clear: the origin signs with it. An event is written
-- with one delivery per subscribed endpoint in one transaction; a claim
-- moves next_at to the end of its lease, so a claim whose delivery loop
-- died falls due again by itself (SQLite has one writer: claims are
-- serialised by it). Events are pruned once their deliveries are
-- finished and the retention passed. Times are timeLayout text.

CREATE TABLE webhook_endpoints (
	id              TEXT PRIMARY KEY,
	org_id          TEXT NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
	url             TEXT NOT NULL,
	events          TEXT NOT NULL, -- a JSON array
	secret          BLOB NOT NULL,
	previous_secret BLOB,
	previous_until  TEXT,
	disabled_at     TEXT,
	disabled_reason TEXT NOT NULL DEFAULT '',
	created_at      TEXT NOT NULL
) STRICT;

CREATE INDEX webhook_endpoints_org_id ON webhook_endpoints (org_id, created_at);

CREATE TABLE webhook_events (
	id         TEXT PRIMARY KEY,
	org_id     TEXT NOT NULL,
	type       TEXT NOT NULL,
	payload    BLOB NOT NULL,
	created_at TEXT NOT NULL
) STRICT;

CREATE INDEX webhook_events_created_at ON webhook_events (created_at);

CREATE TABLE webhook_deliveries (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	event_id    TEXT NOT NULL REFERENCES webhook_events (id) ON DELETE CASCADE,
	endpoint_id TEXT NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
	state       TEXT NOT NULL, -- pending, delivered, failed, cancelled
	attempts    INTEGER NOT NULL DEFAULT 0,
	next_at     TEXT NOT NULL,
	claim       TEXT NOT NULL DEFAULT '',
	last_status INTEGER NOT NULL DEFAULT 0,
	last_error  TEXT NOT NULL DEFAULT '',
	last_at     TEXT,
	finished_at TEXT,
	created_at  TEXT NOT NULL,
	UNIQUE (event_id, endpoint_id)
) STRICT;

CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_at) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, id);
