package pgstore

import "github.com/jackc/pgx/v5/pgxpool"

// PoolStat is the connection pool's state now, for the origin's metrics
// (origin/wiring, read at each scrape).
func (s *Store) PoolStat() *pgxpool.Stat { return s.pool.Stat() }
