package pipeline

import (
	"strings"
	"time"

	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/token"
)

// suspend says why authentication must wait for the JWKS.
type suspend uint8

const (
	suspendFetch suspend = iota + 1 // this request fetches it
	suspendPark                     // another request's fetch is in flight
)

// errSuspended stops front.Run while the request waits for the JWKS; it
// is never answered.
var errSuspended = apierr.New(apierr.Internal, "suspended")

// authenticate is the edge's front.Authenticate, the origin's
// (origin/auth) without I/O: the same refusals for the same tokens, with
// the JWKS fetch turned into a subrequest and the wait for another
// request's fetch into a park. A token verified before, and not expired
// since, is taken from the cache without verifying its signature again.
func (p *Pipeline) authenticate(st *pending, authorization string, now time.Time) (token.Claims, *apierr.Error, suspend) {
	raw, reason, ok := token.BearerToken(authorization)
	if !ok {
		return token.Claims{}, token.Unauthorized(reason), 0
	}
	if c, ok := p.tokens.get(raw, now); ok {
		return c, nil, 0
	}
	// The waits are bounded per request; past the bound the request is
	// verified with whatever keys there are.
	canWait := st.rounds < maxRounds
	// No set yet: fetch first (token.Cache policy). A stale set is served
	// while it is refreshed in the background (a fetch of the host's that
	// no request waits for): a token whose kid the set holds never waits
	// for the identity provider, even a hung one.
	if p.keys.NeedsRefresh(now, false) {
		switch {
		case p.keys.Keys() != nil:
			if p.keys.BeginRefresh(now) {
				p.refresh = p.newHandle()
				p.fetcher, p.ask = p.refresh, true
			}
		case canWait && p.keys.BeginRefresh(now):
			return token.Claims{}, errSuspended, suspendFetch
		}
	}
	if canWait && p.keys.Keys() == nil && p.keys.InFlight(now) {
		return token.Claims{}, errSuspended, suspendPark
	}
	c, f := p.verifier.Verify(raw, p.keys.Keys(), now)
	if f != nil && f.UnknownKey && canWait {
		// A kid the set lacks: a fresher set may hold it. Wait for the
		// fetch in flight, or start one if the rate limit allows.
		if p.keys.InFlight(now) {
			return token.Claims{}, errSuspended, suspendPark
		}
		if p.keys.NeedsRefresh(now, true) && p.keys.BeginRefresh(now) {
			return token.Claims{}, errSuspended, suspendFetch
		}
	}
	if f != nil {
		return token.Claims{}, token.Unauthorized(f.Reason), 0
	}
	p.tokens.put(raw, c)
	return c, nil, 0
}

// wait turns a suspension into the output that asks the host for the
// JWKS, or parks the request behind the fetch in flight.
func (p *Pipeline) wait(st *pending, w suspend, now int64) Output {
	st.rounds++
	if w == suspendPark {
		if !p.keep(st, stageParked, now) {
			return p.busy(st)
		}
		p.parked = append(p.parked, st.handle)
		return Output{Kind: Park, Handle: st.handle}
	}
	if !p.keep(st, stageJWKS, now) {
		// Nobody will fetch: end the refresh at once so that no request
		// parks behind it.
		p.keys.EndRefresh(time.UnixMilli(now), nil, fetchError("edge busy"))
		out := p.busy(st)
		out.Wake = p.takeParked()
		return out
	}
	p.fetcher = st.handle
	return Output{Kind: Subrequest, Handle: st.handle, Method: "GET", URL: p.jwksURL,
		Headers: []Header{{"Accept", "application/json"}}}
}

// endFetch ends the JWKS fetch of handle h (a request's, or a background
// refresh's) with the host's response. A fetch the Cache already presumed
// lost, and that another has replaced, is ignored: only the fetch in
// flight may end it. It reports whether it ended the fetch, and the
// parked requests are then to be woken.
func (p *Pipeline) endFetch(h Handle, in ResumeMsg) bool {
	if p.fetcher != h {
		return false
	}
	p.fetcher = 0
	var set *token.KeySet
	var err error
	switch in.Status {
	case 200:
		set, err = token.ParseJWKS(in.Body)
	case 0:
		err = fetchError("fetch JWKS: " + in.Error)
	default:
		err = fetchError("fetch JWKS: status " + itoa(in.Status))
	}
	p.keys.EndRefresh(time.UnixMilli(in.Now), set, err)
	return true
}

// refreshDone ends the background refresh of handle in.Handle (see
// authenticate) with the host's response: nothing is answered, and the
// requests parked on it are woken.
func (p *Pipeline) refreshDone(in ResumeMsg) Output {
	if in.Now <= 0 {
		in.Status, in.Error = 0, "the host's answer has no clock reading"
	}
	p.endFetch(in.Handle, in)
	p.refresh = 0
	return Output{Kind: Done, Handle: in.Handle, Wake: p.takeParked()}
}

// takeParked returns the requests parked on the JWKS, which the host is
// to wake, and forgets them.
func (p *Pipeline) takeParked() []Handle {
	var out []Handle
	for _, h := range p.parked {
		if st := p.pending[h]; st != nil && st.stage == stageParked {
			out = append(out, h)
		}
	}
	p.parked = p.parked[:0]
	return out
}

// finish wakes the parked requests when no fetch is in flight any more:
// the fetch they waited for outlived token.DefaultInFlightTimeout and is
// presumed lost (docs/edge.md: "the guest also gives up on a fetch").
//
// It also attaches the background refresh begun during the call, if any:
// the host is to fetch the JWKS and resume its handle; and, when leases
// are held, looks them over now and then and attaches a report when one
// is due.
func (p *Pipeline) finish(out Output, now int64) Output {
	if len(p.parked) > 0 && !p.keys.InFlight(time.UnixMilli(now)) {
		out.Wake = append(out.Wake, p.takeParked()...)
	}
	if p.ask {
		out.Refresh = Refresh{Handle: p.refresh, URL: p.jwksURL}
		p.ask = false
	}
	// A lease request carries the reports too: one background is enough.
	if p.ls.on && out.Background.Handle == 0 && (len(p.ls.held) > 0 || len(p.ls.bg) > 0) && (p.ls.due || now >= p.ls.sweepAt) {
		out.Background = p.sweepLeases(now)
	}
	return out
}

type fetchError string

func (e fetchError) Error() string { return string(e) }

// MaxTokens bounds the verified-token cache.
const MaxTokens = 10000

// fifo is a map bounded to max entries, the oldest evicted first (one
// ring slot per entry and no bookkeeping on a hit). The ring grows with
// the entries up to max rather than being made whole at once: TinyGo's
// collector scans every slot of a live slice on each cycle, and 10,000
// empty slots made each cycle cost over a millisecond.
type fifo[K comparable, V any] struct {
	m    map[K]V
	ring []K
	max  int
	head int
}

func newFIFO[K comparable, V any](max int) fifo[K, V] { return fifo[K, V]{m: map[K]V{}, max: max} }

// set adds k or replaces its value, evicting the oldest entry when full.
// The map keeps the k given last, so a caller copies a k that points into
// a message.
func (f *fifo[K, V]) set(k K, v V) {
	if _, ok := f.m[k]; !ok {
		if len(f.ring) < f.max {
			f.ring = append(growRing(f.ring, f.max), k)
		} else {
			delete(f.m, f.ring[f.head])
			f.ring[f.head] = k
			f.head = (f.head + 1) % len(f.ring)
		}
	}
	f.m[k] = v
}

// growRing makes room for one more entry in a ring of at most max: it
// doubles, but never past max (append would round 10,000 up to 16,384
// under TinyGo).
func growRing[T any](r []T, max int) []T {
	if len(r) < cap(r) {
		return r
	}
	grown := make([]T, len(r), min(2*cap(r)+8, max))
	copy(grown, r)
	return grown
}

// tokenCache maps a raw token to its verified claims until it expires,
// bounded (a fifo).
//
// An entry outlives a key's removal from the JWKS. That grants nothing:
// everything the edge does not refuse goes to the origin, which verifies
// the token again.
type tokenCache struct{ fifo[string, token.Claims] }

func newTokenCache(n int) tokenCache { return tokenCache{newFIFO[string, token.Claims](n)} }

// get returns the claims of raw while the verifier would still accept
// them at now (the same leeway on exp, nbf and iat); an entry that no
// longer holds is dropped, so that a full verification gives the exact
// refusal.
func (c *tokenCache) get(raw string, now time.Time) (token.Claims, bool) {
	cl, ok := c.m[raw]
	if !ok {
		return token.Claims{}, false
	}
	if !now.Before(cl.Expiry.Add(token.DefaultLeeway)) ||
		!cl.NotBefore.IsZero() && now.Before(cl.NotBefore.Add(-token.DefaultLeeway)) ||
		!cl.IssuedAt.IsZero() && now.Before(cl.IssuedAt.Add(-token.DefaultLeeway)) {
		delete(c.m, raw)
		return token.Claims{}, false
	}
	return cl, true
}

// put caches raw's claims. raw is a substring of the whole request
// message (one buffer): a copy keeps only the token alive.
func (c *tokenCache) put(raw string, cl token.Claims) { c.set(strings.Clone(raw), cl) }

// MaxOrgs bounds the per-organisation cache.
const MaxOrgs = 10000

// maxOrgValue bounds each value learnt from the origin's headers.
const maxOrgValue = 256

// orgEntry is what the edge knows of an organisation's ETag inputs.
type orgEntry struct {
	org     string // the organisation id, as the origin names it
	grants  string // etag.GrantsDigest of its grants
	version string // X-Service-Content-Version of its latest response
}

// orgCache holds orgEntry by orgKey, bounded (a fifo).
type orgCache struct{ fifo[orgKey, orgEntry] }

func newOrgCache(n int) orgCache { return orgCache{newFIFO[orgKey, orgEntry](n)} }

func (c *orgCache) get(key orgKey) (orgEntry, bool) {
	e, ok := c.m[key]
	return e, ok
}

// put records the origin's answer. A response without a content version
// (an error past the organisation gate) keeps the version known before:
// there is one version for the whole corpus.
func (c *orgCache) put(key orgKey, org, grants, version string) {
	if len(key.id) > 2*maxOrgValue || len(org) > maxOrgValue || len(grants) > maxOrgValue || len(version) > maxOrgValue {
		return
	}
	old, ok := c.m[key]
	if version == "" {
		version = old.version
	}
	if ok && old == (orgEntry{org: org, grants: grants, version: version}) {
		return // what every gate call tells: nothing new
	}
	// The values are substrings of a whole response's headers (one
	// buffer), and the key of a request message: copies keep only them.
	key.id = strings.Clone(key.id)
	c.set(key, orgEntry{org: strings.Clone(org), grants: strings.Clone(grants), version: strings.Clone(version)})
}
