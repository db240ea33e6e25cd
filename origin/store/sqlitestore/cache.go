package sqlitestore

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/lectern-api/lectern/origin/internal/filelock"
	"github.com/lectern-api/lectern/origin/store"
)

// The licence gate reads the caller's organisation on every request, and
// parsing and running that SELECT was the largest single cost of a
// content request. A Store therefore keeps the organisations it has read
// in memory, and every write of an organisation through it invalidates
// the cached copy when its transaction ends; the store's guarantee, that
// a change applies on the next call, holds because the Store is the only
// writer of its file: New takes an exclusive lock beside the database
// (path + ".lock") that a second origin opening the same file is refused.
// The lock is advisory: a write made behind the origin's back (a sqlite3
// shell, another program) is not seen until the origin restarts. Change
// organisations through the admin API.
// Several origins share organisations through PostgreSQL (pgstore), which
// reads afresh.

// orgCache holds organisations read from the database. gen counts
// invalidations: a read that began before one may not store what it read,
// as it may predate the write.
type orgCache struct {
	mu   sync.RWMutex
	gen  uint64
	orgs map[string]*store.Org
}

// get returns a copy of the cached org and the generation to pass to put
// after a miss.
func (c *orgCache) get(id string) (*store.Org, uint64) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if o := c.orgs[id]; o != nil {
		return o.Clone(), c.gen
	}
	return nil, c.gen
}

// put caches o, read from the database, unless an invalidation happened
// since gen.
func (c *orgCache) put(o *store.Org, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return
	}
	if c.orgs == nil {
		c.orgs = map[string]*store.Org{}
	}
	c.orgs[o.ID] = o.Clone()
}

// invalidate drops id; deferred by every write of an organisation, so it
// runs after the write's transaction ends, whatever its outcome.
func (c *orgCache) invalidate(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	delete(c.orgs, id)
}

// lockFile takes the exclusive lock that makes a Store its database's
// only writer.
func lockFile(dbPath string) (*os.File, error) {
	f, err := filelock.Lock(dbPath + ".lock")
	if errors.Is(err, filelock.ErrHeld) {
		return nil, fmt.Errorf("%s is in use by another origin process; several origins share one database through PostgreSQL: %w", dbPath, err)
	}
	return f, err
}
