package sqlitestore_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/lectern-api/lectern/origin/progress/progresstest"
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

func TestProgress(t *testing.T) {
	var paths sync.Map // *testing.T → database path
	progresstest.Run(t, progresstest.Exclusive, func(t *testing.T) progresstest.Store {
		p, _ := paths.LoadOrStore(t, filepath.Join(t.TempDir(), "lectern.db"))
		s, err := sqlitestore.New(t.Context(), p.(string))
		if err != nil {
			t.Fatalf("open store: %v", err)
		}
		return s
	})
}

func BenchmarkProgress(b *testing.B) {
	s, err := sqlitestore.New(b.Context(), filepath.Join(b.TempDir(), "lectern.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	progresstest.Bench(b, s)
}
