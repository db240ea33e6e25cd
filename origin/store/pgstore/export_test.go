package pgstore

import "github.com/jackc/pgx/v5/pgxpool"

// Pool exposes a Store's pool to the tests of package pgstore_test.
func Pool(s *Store) *pgxpool.Pool { return s.pool }
