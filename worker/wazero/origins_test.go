package wazero

import (
	"context"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/valyala/fastjson"
)

func TestParseOrigins(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"http://127.0.0.1:8080", []string{"http://127.0.0.1:8080"}},
		{"http://a:1/, https://b.example/base/ ,http://c", []string{"http://a:1", "https://b.example/base", "http://c"}},
	} {
		got, err := ParseOrigins(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ParseOrigins(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "http://a,", ",http://a", "http://a,http://a/", "a:8080", "ftp://a",
		"http://a?x=1", "http://a#f", "http://u:p@a", "http://"} {
		if got, err := ParseOrigins(bad); err == nil {
			t.Errorf("ParseOrigins(%q) = %q, want an error", bad, got)
		}
	}
}

func urls(ts []target) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.url)
	}
	return out
}

// TestRoute: URLs under the module's origin base go to each origin in
// turn, the others as they are; one in backoff is tried last until its
// backoff ends.
func TestRoute(t *testing.T) {
	o, err := newOrigins("http://a:1/", []string{"http://a:1", "http://b:2/p"}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_000_000, 0)
	o.now = func() time.Time { return now }
	for _, tc := range []struct {
		url  string
		want []string
	}{
		{"http://a:1/v1/tiers?x=1", []string{"http://a:1/v1/tiers?x=1", "http://b:2/p/v1/tiers?x=1"}},
		{"http://a:1/internal/gate", []string{"http://b:2/p/internal/gate", "http://a:1/internal/gate"}},
		{"http://a:1?q", []string{"http://a:1?q", "http://b:2/p?q"}},
		{"http://a:1", []string{"http://b:2/p", "http://a:1"}},
		{"http://a:10/v1/tiers", []string{"http://a:10/v1/tiers"}},                             // another port: not under the base
		{"http://a:1x/v1", []string{"http://a:1x/v1"}},                                         // nor another host
		{"http://idp:9/.well-known/jwks.json", []string{"http://idp:9/.well-known/jwks.json"}}, // the identity provider's
	} {
		if got := urls(o.route(tc.url)); !slices.Equal(got, tc.want) {
			t.Errorf("route(%q) = %q, want %q", tc.url, got, tc.want)
		}
	}

	o.failed(o.list[0])
	for range 3 {
		if got := urls(o.route("http://a:1/v1")); !slices.Equal(got, []string{"http://b:2/p/v1", "http://a:1/v1"}) {
			t.Errorf("a in its backoff: route = %q, want a last", got)
		}
	}
	now = now.Add(5 * time.Second)
	var first []string
	for range 2 {
		first = append(first, o.route("http://a:1/v1")[0].url)
	}
	if slices.Equal(first[:1], first[1:]) {
		t.Errorf("a's backoff over: first choices %q, want a and b in turn", first)
	}

	one, err := newOrigins("http://a:1", nil, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	one.failed(one.list[0])
	if got := urls(one.route("http://a:1/v1")); !slices.Equal(got, []string{"http://a:1/v1"}) {
		t.Errorf("one origin: route = %q, want the URL as it is", got)
	}
	if _, err := newOrigins("http://b:2", []string{"http://a:1", "http://b:2"}, time.Second); err == nil {
		t.Error("a module origin that is not the first of the list was accepted")
	}
}

// TestTraceConnection: a request to a refused port got no connection
// (it was never sent); one reset after it was read did.
func TestTraceConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	ctx, connected := traceConnection(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+closed+"/", nil)
	if _, err := http.DefaultClient.Do(req); err == nil || connected.Load() {
		t.Errorf("a refused connection: %v, connected %v", err, connected.Load())
	}

	ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		b := make([]byte, 4096)
		c.Read(b)
		c.(*net.TCPConn).SetLinger(0)
		c.Close()
	}()
	ctx, connected = traceConnection(context.Background())
	req, _ = http.NewRequestWithContext(ctx, "POST", "http://"+ln.Addr().String()+"/", nil)
	if _, err := http.DefaultClient.Do(req); err == nil || !connected.Load() {
		t.Errorf("a reset after the request: %v, connected %v", err, connected.Load())
	}
}

// The module's retry marks are read from a subrequest, a background call
// and a refresh; any other value is a malformed output.
func TestRetryMark(t *testing.T) {
	var p fastjson.Parser
	out, err := parseOutput(&p, []byte(`{"kind":"subrequest","handle":1,"method":"POST","url":"http://o/x","retry":"unsent",`+
		`"background":{"handle":2,"method":"GET","url":"http://o/y","retry":"any"},"refresh":{"handle":3,"url":"http://o/z","retry":"any"}}`))
	if err != nil || out.Retry != retryUnsent || out.Background.Retry != retryAny || out.Refresh.Retry != retryAny {
		t.Fatalf("got %+v (%+v, %+v), %v", out, out.Background, out.Refresh, err)
	}
	for _, bad := range []string{`{"retry":"always"}`, `{"retry":true}`, `{"background":{"handle":2,"method":"GET","url":"u","retry":""}}`,
		`{"refresh":{"handle":3,"url":"u","retry":1}}`} {
		if _, err := parseOutput(&p, []byte(bad)); err == nil {
			t.Errorf("%s parsed", bad)
		}
	}
}
