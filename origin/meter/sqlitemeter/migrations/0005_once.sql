-- Requests billed once (meter.Op.Once): a row per key an op applied
-- first, written in that op's transaction, with its outcome, so that the
-- same request served again (the edge retried it on another origin)
-- bills nothing and is answered as the first was. refused_stage and
-- refused_step locate the step that refused it (-1: it passed);
-- ledger_first is the id of the first of its ledger_n ledger rows;
-- created is unix microseconds. Rows older than meter.OnceWindow are
-- pruned (PruneOnce).

CREATE TABLE meter_once (
	org           TEXT    NOT NULL,
	key           TEXT    NOT NULL,
	created       INTEGER NOT NULL,
	refused_stage INTEGER NOT NULL,
	refused_step  INTEGER NOT NULL,
	granted       INTEGER NOT NULL,
	ledger_first  INTEGER NOT NULL,
	ledger_n      INTEGER NOT NULL,
	shape         INTEGER NOT NULL,
	PRIMARY KEY (org, key)
) STRICT, WITHOUT ROWID;

CREATE INDEX meter_once_created ON meter_once (created);
