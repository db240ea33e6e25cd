package sqlitestore

import "database/sql"

// DBStats are the state of the store's two pools now, its one write
// connection's and its read-only connections', for the origin's metrics
// (origin/wiring, read at each scrape).
func (s *Store) DBStats() (write, read sql.DBStats) { return s.db.Stats(), s.rdb.Stats() }
