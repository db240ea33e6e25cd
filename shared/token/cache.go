package token

import "time"

// Defaults of the Cache policy.
const (
	DefaultMaxAge          = time.Hour
	DefaultMinInterval     = 30 * time.Second
	DefaultInFlightTimeout = 30 * time.Second
)

// Cache is the JWKS refresh policy both tiers follow, without I/O: it
// holds the current KeySet and decides when to fetch a new one. It starts
// no goroutine and takes no lock; a Cache shared by concurrent requests
// needs the caller's mutex around every call.
//
// The rules:
//   - fetch when there is no set, when the set is older than MaxAge, or
//     when a token names a kid the set lacks;
//   - at most one fetch starts per MinInterval, whatever the reason and
//     whether the last one failed, so a burst of tokens with made-up kids,
//     or an identity provider that is down, costs one fetch per interval;
//   - at most one fetch is in flight (single-flight); one that has not
//     ended after InFlightTimeout is presumed lost and another may start;
//   - a failed fetch keeps the previous set.
//
// The origin (origin/auth) holds one Cache behind a mutex. When
// NeedsRefresh and BeginRefresh agree it fetches in a goroutine of its
// own and calls EndRefresh when the fetch ends; a request that has a set
// and whose token's kid is in it verifies at once, stale set or not
// (stale-while-revalidate), so a hung identity provider delays no such
// request. Only a request without a set, or whose kid the set lacks,
// waits for the fetch in flight.
//
// The edge keeps one Cache per module instance; its pipeline is sans-IO,
// so a fetch is a subrequest. Without a set, when NeedsRefresh and
// BeginRefresh agree, the pipeline answers the host with a subrequest for
// the JWKS and suspends the request; requests that meet InFlight park
// behind it. With a set, stale or not, it verifies at once and, when a
// refresh is due, asks the host for a background fetch under a handle of
// no request's (docs/edge.md, "refresh"). When the host resumes with the
// response, the pipeline calls ParseJWKS and EndRefresh, then verifies
// every parked request against Keys. A fetch the host never answers is
// covered by InFlightTimeout.
type Cache struct {
	MaxAge          time.Duration // zero means DefaultMaxAge
	MinInterval     time.Duration // zero means DefaultMinInterval
	InFlightTimeout time.Duration // zero means DefaultInFlightTimeout

	set       *KeySet
	fetchedAt time.Time // when set was stored
	started   time.Time // when the last fetch began; zero if none yet
	inFlight  bool
	err       error // of the last fetch
}

// Keys is the current key set, nil before the first successful fetch.
func (c *Cache) Keys() *KeySet { return c.set }

// FetchedAt is when the current key set was stored.
func (c *Cache) FetchedAt() time.Time { return c.fetchedAt }

// Err is the error of the last fetch, nil if it succeeded or none ended.
func (c *Cache) Err() error { return c.err }

// NeedsRefresh reports whether the caller should fetch the JWKS now: the
// set is absent or older than MaxAge, or unknownKid is set (a token named
// a kid the set lacks), and no fetch has begun in the last MinInterval.
// A true answer is followed by BeginRefresh, which makes the fetch
// single-flight.
func (c *Cache) NeedsRefresh(now time.Time, unknownKid bool) bool {
	if !c.started.IsZero() && now.Sub(c.started) < or(c.MinInterval, DefaultMinInterval) {
		return false // rate limit: also backs off after a failed fetch
	}
	return c.set == nil || unknownKid || now.Sub(c.fetchedAt) >= or(c.MaxAge, DefaultMaxAge)
}

// BeginRefresh marks a fetch as started at now. It returns false when one
// is already in flight, and the caller must then not fetch.
func (c *Cache) BeginRefresh(now time.Time) bool {
	if c.InFlight(now) {
		return false
	}
	c.inFlight = true
	c.started = now
	return true
}

// InFlight reports whether a fetch has begun and not ended, and is not
// older than InFlightTimeout.
func (c *Cache) InFlight(now time.Time) bool {
	return c.inFlight && now.Sub(c.started) < or(c.InFlightTimeout, DefaultInFlightTimeout)
}

// EndRefresh ends the fetch begun by BeginRefresh: on success (err nil,
// set non-nil) set becomes the current set, fetched at now; on failure the
// current set stays. It may also be called without BeginRefresh to
// install a set fetched otherwise, for example at start-up.
func (c *Cache) EndRefresh(now time.Time, set *KeySet, err error) {
	c.inFlight = false
	if err == nil && set == nil {
		err = errNoSet
	}
	c.err = err
	if err != nil {
		return
	}
	c.set = set
	c.fetchedAt = now
}

type cacheError string

func (e cacheError) Error() string { return string(e) }

const errNoSet = cacheError("token: EndRefresh without a key set")

func or(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
