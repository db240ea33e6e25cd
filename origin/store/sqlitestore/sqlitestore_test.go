package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/origin/store/sqlitestore"
	"github.com/lectern-api/lectern/origin/store/storetest"
)

func TestStore(t *testing.T) {
	storetest.Run(t, storetest.Exclusive, func(t *testing.T) storetest.Opener {
		// A directory that does not exist yet: New creates it.
		path := filepath.Join(t.TempDir(), "var", "lectern.db")
		return func(ctx context.Context) (store.Store, error) {
			return sqlitestore.New(ctx, path)
		}
	})
}
