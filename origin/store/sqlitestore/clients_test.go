package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/origin/store/sqlitestore"
	"github.com/lectern-api/lectern/origin/store/storetest"
)

var _ storetest.SecretHashReplacer = (*sqlitestore.Store)(nil)

func TestClientSecretHashes(t *testing.T) {
	storetest.RunClientSecretHashes(t, func(t *testing.T) storetest.Opener {
		path := filepath.Join(t.TempDir(), "lectern.db")
		return func(ctx context.Context) (store.Store, error) { return sqlitestore.New(ctx, path) }
	})
}
