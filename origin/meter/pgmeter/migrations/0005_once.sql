-- Requests billed once (meter.Op.Once): a row per key an op applied
-- first, written in that op's transaction, which holds its org's alarm
-- row lock, as does every batch that applies an op of the org: so a
-- batch sees every key of its orgs committed before it, from any origin.
-- The row keeps the outcome, so that the same request served again (the
-- edge retried it on another origin) bills nothing and is answered as
-- the first was. refused_stage and refused_step locate the step that
-- refused it (-1: it passed); ledger_first is the id of the first of its
-- ledger_n ledger rows; shape is a hash of what the op bills (its steps'
-- meters and units, its ledger rows, its lesson read), which the same
-- request's op on another origin matches. Rows older than meter.OnceWindow are pruned
-- (PruneOnce). An older release ignores the table (expand only).

CREATE TABLE meter_once (
	org           text        NOT NULL,
	key           text        NOT NULL,
	created       timestamptz NOT NULL,
	refused_stage integer     NOT NULL,
	refused_step  integer     NOT NULL,
	granted       bigint      NOT NULL,
	ledger_first  bigint      NOT NULL,
	ledger_n      integer     NOT NULL,
	shape         bigint      NOT NULL,
	PRIMARY KEY (org, key)
);

CREATE INDEX meter_once_created ON meter_once (created);
