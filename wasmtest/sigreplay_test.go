package wasmtest

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/lectern-api/lectern/shared/edgesig"
	"github.com/lectern-api/lectern/shared/lease"
	"github.com/lectern-api/lectern/worker/wazero"
)

// tap is a recording proxy on a real listener: it keeps every request it
// passes on, and can swallow the next one to a path (kept, answered 503,
// never passed on), so that a test holds a signature no receiver has seen.
type tap struct {
	srv *httptest.Server
	mu  sync.Mutex
	to  *url.URL
	rp  *httputil.ReverseProxy
	got []captured
	eat map[string]int // path: how many to swallow
}

// captured is a request as the tap received it.
type captured struct {
	method, host, target string
	header               http.Header
	body                 []byte
	swallowed            bool
}

// newTap starts a tap; point it at its receiver with pass before use.
// The receiver sees the Host field the sender wrote: the tap's.
func newTap(t *testing.T) *tap {
	tp := &tap{eat: map[string]int{}}
	tp.srv = httptest.NewServer(tp)
	t.Cleanup(tp.srv.Close)
	return tp
}

func (tp *tap) pass(to string) {
	u, _ := url.Parse(to)
	tp.mu.Lock()
	tp.to, tp.rp = u, httputil.NewSingleHostReverseProxy(u)
	tp.mu.Unlock()
}

func (tp *tap) host() string { return strings.TrimPrefix(tp.srv.URL, "http://") }

// swallow makes the tap keep the next request to path from its receiver.
func (tp *tap) swallow(path string) {
	tp.mu.Lock()
	tp.eat[path]++
	tp.mu.Unlock()
}

func (tp *tap) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	c := captured{method: r.Method, host: r.Host, target: r.URL.RequestURI(), header: r.Header.Clone(), body: body}
	tp.mu.Lock()
	if tp.eat[r.URL.Path] > 0 {
		tp.eat[r.URL.Path]--
		c.swallowed = true
	}
	tp.got = append(tp.got, c)
	rp := tp.rp
	tp.mu.Unlock()
	if c.swallowed || rp == nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	rp.ServeHTTP(w, r)
}

// last returns the last request swallowed on path.
func (tp *tap) last(t *testing.T, path string) captured {
	t.Helper()
	tp.mu.Lock()
	defer tp.mu.Unlock()
	for i := len(tp.got) - 1; i >= 0; i-- {
		if c := tp.got[i]; c.swallowed && strings.SplitN(c.target, "?", 2)[0] == path {
			return c
		}
	}
	t.Fatalf("the tap swallowed no request to %s", path)
	return captured{}
}

// replay sends c again to base, as it was or changed by edit.
func replay(t *testing.T, base string, c captured, edit func(*http.Request)) *http.Response {
	t.Helper()
	req, err := http.NewRequest(c.method, base+c.target, bytes.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = c.header.Clone()
	req.Host = c.host
	if edit != nil {
		edit(req)
	}
	req.ContentLength = -1
	if b, ok := req.Body.(interface{ Len() int }); ok {
		req.ContentLength = int64(b.Len())
	}
	resp, err := rawClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// TestSignedCallsCannotBeReplayed (issue 27): a recording proxy between
// the edge and the origin, and between the origin and the edge's revoke
// endpoint, captures each kind of signed call: forward (with a body, and
// without), gate, lease, usage and revoke. Each captured call, kept from
// its receiver, is refused there with another body, another token or
// another host, accepted once as it was, refused when sent again; one
// captured and held past the time window is refused too. A forward whose
// signature is refused is served as a direct request (no X-Lectern-Org):
// the other calls answer 404, as without a signature.
func TestSignedCallsCannotBeReplayed(t *testing.T) {
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	forEachBuild(t, func(t *testing.T, b *build) {
		toOrigin, toEdge := newTap(t), newTap(t)
		o := startLeaseOrigin(t, "LECTERN_LEASE_TTL=3s", "LECTERN_EDGE_URLS="+toEdge.srv.URL)
		midHour(t, o)
		toOrigin.pass(o.api)
		via := func(c *wazero.Config) {
			c.Origin = toOrigin.srv.URL
			c.Revoke = toEdge.srv.URL + lease.RevokePath
		}
		e := newLeaseEdge(t, b, o, via)
		toEdge.pass(e.url)
		gated := newEdge(t, b, o, func(c *wazero.Config) { c.Origin, c.Instances = toOrigin.srv.URL, 1 })

		scopes := []string{"content.read", "media.download"}
		id, secret := o.org(t, `{"orgId":"acme","contentGrants":`+allTiers+`}`, scopes...)
		tok := o.token(t, id, secret, scopes...)
		id2, secret2 := o.org(t, `{"orgId":"other","contentGrants":`+allTiers+`}`, scopes...)
		tok2 := o.token(t, id2, secret2, scopes...)
		const target = "/v1/tiers"
		media := content.Subjects[0].Lessons[0].Media[0].ID

		accepted := map[string]func(*http.Response) bool{
			"forward": func(r *http.Response) bool { return r.Header.Get(edgesig.OrgHeader) != "" },
			"gate":    func(r *http.Response) bool { return r.StatusCode == 204 || r.StatusCode == 412 },
			"lease":   func(r *http.Response) bool { return r.StatusCode == 200 },
			"usage":   func(r *http.Response) bool { return r.StatusCode == 204 },
			"revoke":  func(r *http.Response) bool { return r.StatusCode == 200 },
		}
		check := func(kind, base string, c captured) {
			t.Helper()
			ok := accepted[kind]
			for name, edit := range map[string]func(*http.Request){
				"another body": func(r *http.Request) {
					r.Body = io.NopCloser(strings.NewReader(string(c.body) + " "))
				},
				"another token": func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok2) },
				"another host":  func(r *http.Request) { r.Host = "peer.internal:8080" },
				"another usage": func(r *http.Request) { r.Header.Set(lease.UsageHeader, "0123456789abcdef0123456789abcdef=1") },
			} {
				if resp := replay(t, base, c, edit); ok(resp) {
					t.Errorf("%s with %s: accepted (%d)", kind, name, resp.StatusCode)
				}
			}
			if resp := replay(t, base, c, nil); !ok(resp) {
				t.Errorf("%s as captured, the first time: refused (%d)", kind, resp.StatusCode)
			}
			if resp := replay(t, base, c, nil); ok(resp) {
				t.Errorf("%s as captured, again: accepted (%d)", kind, resp.StatusCode)
			}
		}

		// lease: the edge's first lease request, kept from the origin.
		toOrigin.swallow(lease.Path)
		first := do(t, e.url, "GET", target, "", "Authorization", "Bearer "+tok)
		tag := first.header.Get("ETag")
		e.cond(t, tok, target, tag)
		waitFor(t, "a lease request", func() bool { return len(capturedOn(toOrigin, lease.Path)) > 0 })
		check("lease", o.api, toOrigin.last(t, lease.Path))

		// forward, without a body and with one (a media mint).
		toOrigin.swallow("/v1/tiers")
		do(t, e.url, "GET", "/v1/tiers", "", "Authorization", "Bearer "+tok)
		check("forward", o.api, toOrigin.last(t, "/v1/tiers"))
		toOrigin.swallow("/v1/media/urls")
		do(t, e.url, "POST", "/v1/media/urls", `{"mediaIds":["`+media+`"]}`, "Authorization", "Bearer "+tok, "Content-Type", "application/json")
		check("forward", o.api, toOrigin.last(t, "/v1/media/urls"))

		// gate: through the edge without leases.
		do(t, gated.url, "GET", target, "", "Authorization", "Bearer "+tok)
		toOrigin.swallow(edgesig.GatePath)
		do(t, gated.url, "GET", target, "", "Authorization", "Bearer "+tok, "If-None-Match", tag)
		check("gate", o.api, toOrigin.last(t, edgesig.GatePath))

		// usage: a leased 304, then the edge's report of it.
		e.acquire(t, tok, target)
		toOrigin.swallow(lease.UsagePath)
		e.host.Flush(t.Context()) // fails: the tap keeps the report
		check("usage", o.api, toOrigin.last(t, lease.UsagePath))

		// revoke: an admin change pushes one to the edge holding a lease.
		e.acquire(t, tok, target)
		toEdge.swallow(lease.RevokePath)
		if code, m := o.adminCall(t, "PATCH", "/admin/v1/orgs/acme", `{"contentGrants":`+allTiers+`}`); code != 200 {
			t.Fatalf("patch: %d %v", code, m)
		}
		check("revoke", e.url, toEdge.last(t, lease.RevokePath))

		// The window: a forward kept past it is refused.
		toOrigin.swallow("/v1/tiers")
		do(t, e.url, "GET", "/v1/tiers", "", "Authorization", "Bearer "+tok)
		held := toOrigin.last(t, "/v1/tiers")
		o.advance(t, edgesig.Window/1000+1)
		if resp := replay(t, o.api, held, nil); accepted["forward"](resp) {
			t.Errorf("a forward replayed after the window: accepted")
		}
	})
}

// capturedOn lists what tp received on path.
func capturedOn(tp *tap, path string) []captured {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	var out []captured
	for _, c := range tp.got {
		if strings.SplitN(c.target, "?", 2)[0] == path {
			out = append(out, c)
		}
	}
	return out
}
