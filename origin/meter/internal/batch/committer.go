package batch

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lectern-api/lectern/origin/meter"
)

// ErrClosed is returned by Apply after Close.
var ErrClosed = errors.New("meter store closed")

// DefaultMaxBatch is the default cap on the ops committed in one
// transaction.
const DefaultMaxBatch = 256

// yields is how many times the committer lets the goroutines that are
// ready to run go first before it closes a batch, so that those about to
// queue an op join it. A busy origin's ops arrive spread out: without
// this, make bench's edge 304s (16 clients, 2 cores) were committed about
// 1.07 ops a transaction, with it about 2.1, for about 15% more 304s a
// second. On an idle machine nothing else is ready and it costs nothing.
const yields = 4

// A request's states: queued until the committer takes it into a batch,
// or cancelled by its caller first. The one compare-and-swap that leaves
// queued decides whether the op is applied.
const (
	queued int32 = iota
	taken
	cancelled
)

type request struct {
	job   Job
	state atomic.Int32
	done  chan reply // buffered: the committer never blocks on a reply
}

type reply struct {
	out Outcome
	err error
}

// Committer batches concurrent ops into one transaction each: one
// goroutine drains whatever is queued (up to its max), commits it, and
// only then answers every op of the batch. While a batch commits, the
// next one queues, so n clients share one transaction (and, where the
// backend syncs every commit, one disk flush) instead of paying n.
type Committer struct {
	b        Backend // used by the committer's goroutine only
	max      int
	onCommit CommitHook
	queue    chan *request

	mu      sync.RWMutex // held for reading while sending on queue
	closed  bool
	stopped chan struct{}
}

// CommitHook is told of every batch transaction: its ops, how long it
// took (retries included) and its error (nil: committed). It runs on the
// committer's goroutine, between the commit and the answers: it must be
// quick (internal/telemetry counts it).
type CommitHook func(ops int, took time.Duration, err error)

// NewCommitter starts a committer of batches of at most max ops
// (DefaultMaxBatch when max <= 0) in transactions of b, telling onCommit
// (nil: nobody) of each. Close stops it.
func NewCommitter(b Backend, max int, onCommit CommitHook) *Committer {
	if max <= 0 {
		max = DefaultMaxBatch
	}
	c := &Committer{
		b:        b,
		max:      max,
		onCommit: onCommit,
		queue:    make(chan *request, 4*max),
		stopped:  make(chan struct{}),
	}
	go c.run()
	return c
}

// Apply queues op and waits for its batch. A ctx done while the op is
// still queued withdraws it (ctx.Err(), nothing applied). Once the
// committer has taken it into a batch, Apply waits for that batch's
// transaction, which is bounded by Timeout, and reports its outcome even
// if ctx is done by then: so an error always means that nothing was
// applied, as meter.Store promises, at the cost of a late return of at
// most one transaction. op is expected to be valid (Validate).
func (c *Committer) Apply(ctx context.Context, op meter.Op) (meter.Result, error) {
	out, err := c.Do(ctx, Job{Op: op})
	return out.Result, err
}

// Reinstate lifts the enumeration alarm of org in a batch, and reports
// whether one was in force. ctx withdraws it as it does an op (Apply).
func (c *Committer) Reinstate(ctx context.Context, org string) (bool, error) {
	out, err := c.Do(ctx, Job{Op: meter.Op{Org: org}, Reinstate: true})
	return out.Result.Suspended, err
}

// Do queues j and waits for its batch, as Apply does an op; a job's own
// refusal (Outcome.Err) is returned as its error.
func (c *Committer) Do(ctx context.Context, j Job) (Outcome, error) {
	r := &request{job: j, done: make(chan reply, 1)}
	c.mu.RLock()
	if c.closed {
		c.mu.RUnlock()
		return Outcome{}, ErrClosed
	}
	select {
	case c.queue <- r:
	case <-ctx.Done():
		c.mu.RUnlock()
		return Outcome{}, ctx.Err()
	}
	c.mu.RUnlock()
	select {
	case rep := <-r.done:
		return rep.outcome()
	case <-ctx.Done():
		if r.state.CompareAndSwap(queued, cancelled) {
			return Outcome{}, ctx.Err()
		}
		rep := <-r.done
		return rep.outcome()
	}
}

func (r reply) outcome() (Outcome, error) {
	if r.err != nil {
		return Outcome{}, r.err
	}
	return r.out, r.out.Err
}

func (c *Committer) run() {
	defer close(c.stopped)
	batch := make([]*request, 0, c.max)
	jobs := make([]Job, 0, c.max)
	for r := range c.queue {
		batch = c.fill(append(batch[:0], r))
		live := batch[:0]
		for _, r := range batch {
			if r.state.CompareAndSwap(queued, taken) {
				live = append(live, r)
			}
		}
		if len(live) == 0 {
			continue
		}
		jobs = jobs[:0]
		for _, r := range live {
			jobs = append(jobs, r.job)
		}
		ctx, cancel := context.WithTimeout(context.Background(), Timeout)
		began := time.Now()
		results, err := Commit(ctx, c.b, jobs)
		cancel()
		if c.onCommit != nil {
			c.onCommit(len(jobs), time.Since(began), err)
		}
		for i, r := range live {
			if err != nil {
				r.done <- reply{err: err}
			} else {
				r.done <- reply{out: results[i]}
			}
		}
		clear(batch) // drop references to answered requests
		clear(jobs)
	}
}

// fill adds to batch the ops queued, up to the cap, yielding to other
// goroutines in between (yields) while there is room.
func (c *Committer) fill(batch []*request) []*request {
	for y := 0; ; y++ {
		for len(batch) < c.max {
			select {
			case r, ok := <-c.queue:
				if !ok {
					return batch
				}
				batch = append(batch, r)
				continue
			default:
			}
			break
		}
		if y == yields || len(batch) == c.max {
			return batch
		}
		runtime.Gosched()
	}
}

// Close stops taking ops, commits those already queued and waits for the
// committer to finish. Apply fails with ErrClosed afterwards. Close may
// be called more than once.
func (c *Committer) Close() {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.queue)
	}
	c.mu.Unlock()
	<-c.stopped
}
