package sqlitestore

import (
	"sync"

	"github.com/lectern-api/lectern/origin/progress"
)

// Reading a learner's record was most of the cost of GET /v1/progress:
// SQLite prepares the SELECT on every query, steps through the
// document's overflow pages, and the document is decoded each time
// (bench-progfast.md). A Store therefore keeps the records it has read or
// saved, decoded, in a write-through cache, coherent for the same reason
// as orgCache: the Store is the only writer of its file, so every save of
// a record goes through it. A successful save caches the record as the
// database now holds it; a save refused as a conflict, and DeleteOrg, drop
// what they touch. pgstore reads afresh: several origins write through
// PostgreSQL.
//
// Ordering. Saves run one at a time on the write connection, but what
// each does after its commit (updating the cache) races with the others
// and with reads:
//   - a save stores its record only if no other write updated the cache
//     since the save began (gen): two saves may update the cache out of
//     commit order, and the newer one's entry may have been evicted by
//     then, so a late save must not bring its older record back; it only
//     drops a cached record older than its own;
//   - a read that missed stores what it loaded only if no write of any
//     record (save, conflict, DeleteOrg) updated the cache since the read
//     began (gen): what it loaded may predate that write, and the write's
//     entry may have been evicted since;
//   - a save stores its record only if no DeleteOrg dropped entries since
//     it began (drops): the organisation's rows may be gone.
// So once SaveProgress has returned version v, a Progress that begins
// afterwards returns version v or a later one.

// progressBudget bounds the cache by weight, one per record plus one per
// recorded class, since records are not bounded in size: a decoded class
// takes about 140 bytes (a 100-class record decodes into 13.9 KB), so the
// budget holds at most about 18 MiB of classes — e.g. 1 300 learners with
// 100 classes each — well inside the origin's 400 MiB resident goal. A
// record heavier than the whole budget is not cached.
const progressBudget = 1 << 17

type progressKey struct{ org, learner string }

// progressEntry is a cached record, in a doubly linked list from most to
// least recently used.
type progressEntry struct {
	key        progressKey
	rec        *progress.Record // shared with readers, so never modified
	weight     int
	prev, next *progressEntry
}

// progressCache is an LRU of decoded records, bounded by weight.
type progressCache struct {
	mu     sync.Mutex
	budget int // 0: progressBudget
	weight int // of the entries held
	gen    uint64
	drops  uint64
	m      map[progressKey]*progressEntry
	head   *progressEntry // most recently used
	tail   *progressEntry // least recently used
}

// get returns the cached record, shared (nil if none), and the
// generation to pass to fill on a miss.
func (c *progressCache) get(org, learner string) (*progress.Record, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.m[progressKey{org, learner}]
	if e == nil {
		return nil, c.gen
	}
	c.unlink(e)
	c.pushFront(e)
	return e.rec, c.gen
}

// fill caches r, read from the database after a miss that returned gen,
// unless a write has updated the cache since.
func (c *progressCache) fill(r *progress.Record, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return
	}
	c.put(r)
}

// saveMark is the cache's state when a save began.
type saveMark struct{ gen, drops uint64 }

// begin returns the mark to pass to saved, taken before a save runs.
func (c *progressCache) begin() saveMark {
	c.mu.Lock()
	defer c.mu.Unlock()
	return saveMark{c.gen, c.drops}
}

// saved caches r, just committed at r.Version, if no other write updated
// the cache since begin returned m. Otherwise it only drops a cached
// record of the learner older than r (unless a DeleteOrg ran since: it
// dropped them all). The cache owns r.
func (c *progressCache) saved(r *progress.Record, m saveMark) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	switch {
	case c.drops != m.drops:
	case c.gen != m.gen+1:
		if e := c.m[progressKey{r.OrgID, r.Learner}]; e != nil && e.rec.Version < r.Version {
			c.remove(e)
		}
	default:
		c.put(r)
	}
}

// drop forgets the record of learner in org (a save refused as a
// conflict: another write moved it).
func (c *progressCache) drop(org, learner string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	if e := c.m[progressKey{org, learner}]; e != nil {
		c.remove(e)
	}
}

// dropOrg forgets every record of org; deferred by DeleteOrg, so it runs
// after the delete's statement whatever its outcome.
func (c *progressCache) dropOrg(org string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.drops++
	for k, e := range c.m {
		if k.org == org {
			c.remove(e)
		}
	}
}

// put stores r (the cache's from now on, and shared with readers, so
// never modified) unless a record of a
// higher version is cached, then evicts the least recently used entries
// down to the budget. c.mu is held.
func (c *progressCache) put(r *progress.Record) {
	budget := c.budget
	if budget == 0 {
		budget = progressBudget
	}
	k := progressKey{r.OrgID, r.Learner}
	if e := c.m[k]; e != nil {
		if e.rec.Version > r.Version {
			return
		}
		c.remove(e)
	}
	w := 1 + len(r.Classes)
	if w > budget {
		return
	}
	if c.m == nil {
		c.m = map[progressKey]*progressEntry{}
	}
	e := &progressEntry{key: k, rec: r, weight: w}
	c.m[k] = e
	c.pushFront(e)
	c.weight += w
	for c.weight > budget {
		c.remove(c.tail)
	}
}

// remove unlinks e and forgets it. c.mu is held.
func (c *progressCache) remove(e *progressEntry) {
	c.unlink(e)
	delete(c.m, e.key)
	c.weight -= e.weight
}

func (c *progressCache) unlink(e *progressEntry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		c.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		c.tail = e.prev
	}
	e.prev, e.next = nil, nil
}

func (c *progressCache) pushFront(e *progressEntry) {
	e.next = c.head
	if c.head != nil {
		c.head.prev = e
	}
	c.head = e
	if c.tail == nil {
		c.tail = e
	}
}
