package pgstore_test

import (
	"context"
	"testing"

	"github.com/lectern-api/lectern/internal/pgschema"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/origin/store/pgstore"
	"github.com/lectern-api/lectern/origin/store/storetest"
)

var _ storetest.SecretHashReplacer = (*pgstore.Store)(nil)

// TestClientSecretHashes runs storetest.RunClientSecretHashes against
// LECTERN_TEST_PG, each subtest in a fresh schema.
func TestClientSecretHashes(t *testing.T) {
	const what = "the PostgreSQL client secret hash suite"
	pgschema.Base(t, what)
	storetest.RunClientSecretHashes(t, func(t *testing.T) storetest.Opener {
		dsn := pgschema.ForTest(t, what)
		return func(ctx context.Context) (store.Store, error) { return pgstore.New(ctx, dsn) }
	})
}
