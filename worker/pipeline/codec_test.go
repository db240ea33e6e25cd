package pipeline

import (
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/lectern-api/lectern/shared/link"
	"github.com/lectern-api/lectern/shared/token/tokentest"
)

// wireOutput is an output message as a host reads it.
type wireOutput struct {
	Kind        string     `json:"kind"`
	Handle      int64      `json:"handle"`
	Status      int        `json:"status"`
	Headers     [][]string `json:"headers"`
	Body        *string    `json:"body"`
	Passthrough bool       `json:"passthrough"`
	Method      string     `json:"method"`
	URL         string     `json:"url"`
	Forward     bool       `json:"forward"`
	Retry       string     `json:"retry"`
	Wake        []int64    `json:"wake"`
	Refresh     *struct {
		Handle int64  `json:"handle"`
		URL    string `json:"url"`
		Retry  string `json:"retry"`
	} `json:"refresh"`
	Background *struct {
		Handle  int64      `json:"handle"`
		Method  string     `json:"method"`
		URL     string     `json:"url"`
		Headers [][]string `json:"headers"`
		Retry   string     `json:"retry"`
		Body    string     `json:"body"`
	} `json:"background"`
	Lease *struct {
		ID   string `json:"id"`
		Used int64  `json:"used"`
	} `json:"lease"`
}

func decodeOut(t testing.TB, b []byte) wireOutput {
	t.Helper()
	var o wireOutput
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.DisallowUnknownFields()
	if err := d.Decode(&o); err != nil {
		t.Fatalf("output %s: %v", b, err)
	}
	return o
}

func TestParseConfig(t *testing.T) {
	good := `{"origin":"http://127.0.0.1:8080","jwksUrl":"http://127.0.0.1:9090/.well-known/jwks.json","issuer":"http://127.0.0.1:9090","audience":"lectern-api","secret":"s3cret","resourceMetadata":"http://127.0.0.1:8787/.well-known/oauth-protected-resource","extra":1}`
	cfg, err := ParseConfig([]byte(good))
	want := Config{Origin: "http://127.0.0.1:8080", JWKSURL: "http://127.0.0.1:9090/.well-known/jwks.json", Issuer: "http://127.0.0.1:9090",
		Audience: "lectern-api", Secret: "s3cret", ResourceMetadata: "http://127.0.0.1:8787/.well-known/oauth-protected-resource",
		URLKeys: link.Derived([]byte("s3cret"))} // no urlKeys: the secret's
	if err != nil || !reflect.DeepEqual(cfg, want) {
		t.Errorf("got %+v, %v; want %+v", cfg, err, want)
	}
	keys := "b=url-key-b-0123456789abcdef0123456789abcdef,a=url-key-a-0123456789abcdef0123456789abcdef"
	cfg, err = ParseConfig([]byte(strings.Replace(good, `"extra":1`, `"urlKeys":"`+keys+`"`, 1)))
	if want, _ := link.ParseKeys(keys); err != nil || !reflect.DeepEqual(cfg.URLKeys, want) {
		t.Errorf("with urlKeys: got %+v, %v; want %+v", cfg.URLKeys, err, want)
	}
	for _, bad := range []string{``, `[]`, `{"origin":1}`, `{"origin":"x"}`, strings.Replace(good, `"secret":"s3cret"`, `"secret":""`, 1), `{"origin":` + strings.Repeat("[", 20),
		strings.Replace(good, `"extra":1`, `"urlKeys":"a=short"`, 1), strings.Replace(good, `"extra":1`, `"urlKeys":1`, 1)} {
		if _, err := ParseConfig([]byte(bad)); err == nil {
			t.Errorf("ParseConfig(%.40q) succeeded", bad)
		}
	}
	if got := string(ConfigResult(nil)); got != `{"kind":"configured"}` {
		t.Errorf("ConfigResult(nil) = %s", got)
	}
	if got := string(ConfigResult(fmt.Errorf(`bad "x"`))); got != `{"kind":"error","error":"bad \"x\""}` {
		t.Errorf("ConfigResult(err) = %s", got)
	}
}

// The messages of docs/edge.md, end to end through the JSON codec.
func TestCodecFlow(t *testing.T) {
	p := newPipeline()
	tok := sign("k1", t0, nil)
	start := fmt.Sprintf(`{"method":"GET","path":"/v1/subjects/algebra","query":"tier=high","headers":[["Authorization","Bearer %s"],["Accept-Encoding","gzip"],["X-Request-Id","req-test-0001"]],"now":%d}`, tok, t0ms)
	o := decodeOut(t, p.HandleStart([]byte(start)))
	if o.Kind != "subrequest" || o.Method != "GET" || o.URL != testCfg.JWKSURL || o.Forward || o.Handle == 0 || o.Retry != "any" {
		t.Fatalf("start: got %+v, want the JWKS subrequest", o)
	}
	h := o.Handle
	o2 := decodeOut(t, p.HandleStart([]byte(start)))
	if o2.Kind != "park" || o2.Handle == h {
		t.Fatalf("second start: got %+v, want park", o2)
	}
	resume, _ := json.Marshal(map[string]any{"handle": h, "status": 200, "headers": [][]string{{"Content-Type", "application/json"}},
		"body": string(tokentest.JWKS("k1")), "now": t0ms + 20})
	o = decodeOut(t, p.HandleResume(resume))
	if o.Kind != "subrequest" || !o.Forward || o.URL != "http://origin.test/v1/subjects/algebra?tier=high" || o.Retry != "any" ||
		!reflect.DeepEqual(o.Wake, []int64{o2.Handle}) {
		t.Fatalf("resume: got %+v, want a forward waking %d", o, o2.Handle)
	}
	o3 := decodeOut(t, p.HandleResume([]byte(fmt.Sprintf(`{"handle":%d,"wake":true,"now":%d}`, o2.Handle, t0ms+21))))
	if o3.Kind != "subrequest" || !o3.Forward {
		t.Fatalf("wake: got %+v", o3)
	}
	o = decodeOut(t, p.HandleResume([]byte(fmt.Sprintf(`{"handle":%d,"status":200,"headers":[["Content-Type","application/json"],["X-Lectern-Org","acme"],["X-Lectern-Grants","00ff"],["X-Service-Content-Version","v1"]],"now":%d}`, h, t0ms+40))))
	want := wireOutput{Kind: "response", Handle: int64(h), Status: 200, Passthrough: true,
		Headers: [][]string{{"Content-Type", "application/json"}, {"X-Service-Content-Version", "v1"}}}
	if !reflect.DeepEqual(o, want) {
		t.Errorf("forward answer: got %+v, want %+v", o, want)
	}
	// An error response carries its body as text.
	o = decodeOut(t, p.HandleStart([]byte(fmt.Sprintf(`{"method":"GET","path":"/v1/nope","query":"","headers":[],"now":%d}`, t0ms))))
	if o.Kind != "response" || o.Status != 404 || o.Body == nil || !strings.Contains(*o.Body, `"NOT_FOUND"`) {
		t.Errorf("404: got %+v", o)
	}
}

// A background refresh through the codec: the field on the output that
// begins it, and the "done" that ends it.
func TestCodecRefresh(t *testing.T) {
	p := newPipeline()
	installKeys(t, p, t0, "k1")
	now := t0.Add(2 * time.Hour)
	start := fmt.Sprintf(`{"method":"GET","path":"/v1/subjects/algebra","query":"tier=high","headers":[["Authorization","Bearer %s"]],"now":%d}`, sign("k1", now, nil), now.UnixMilli())
	o := decodeOut(t, p.HandleStart([]byte(start)))
	if o.Kind != "subrequest" || !o.Forward || o.Refresh == nil || o.Refresh.URL != testCfg.JWKSURL || o.Refresh.Handle == 0 || o.Refresh.Handle == o.Handle ||
		o.Refresh.Retry != "any" {
		t.Fatalf("start: got %+v, want a forward with a background refresh", o)
	}
	resume, _ := json.Marshal(map[string]any{"handle": o.Refresh.Handle, "status": 200, "body": string(tokentest.JWKS("k1", "k2")), "now": now.UnixMilli() + 5})
	d := decodeOut(t, p.HandleResume(resume))
	if want := (wireOutput{Kind: "done", Handle: o.Refresh.Handle}); !reflect.DeepEqual(d, want) {
		t.Errorf("refresh answer: got %+v, want %+v", d, want)
	}
}

// docs/edge.md, Several origins: the module marks what a host may send to
// the next origin. Any failed attempt of an idempotent method (RFC 9110
// §9.2.2); of any other only one never sent: a POST may have been
// applied. The mark is on every subrequest, background call and refresh.
func TestRetryMarks(t *testing.T) {
	for method, want := range map[string]Retry{"GET": RetryAny, "HEAD": RetryAny, "PUT": RetryAny, "DELETE": RetryAny,
		"OPTIONS": RetryAny, "TRACE": RetryAny, "POST": RetryUnsent, "PATCH": RetryUnsent, "CONNECT": RetryUnsent} {
		if got := retryOf(method); got != want {
			t.Errorf("retryOf(%s) = %v, want %v", method, got, want)
		}
	}
	for _, method := range []string{"GET", "PUT", "POST"} {
		out := Output{Kind: Subrequest, Handle: 1, Method: method, URL: "http://origin.test/x", Forward: true,
			Background: Background{Handle: 2, Method: method, URL: "http://origin.test/internal/usage"},
			Refresh:    Refresh{Handle: 3, URL: testCfg.JWKSURL}}
		o := decodeOut(t, out.AppendJSON(nil))
		want := retryOf(method).String()
		if o.Retry != want || o.Background == nil || o.Background.Retry != want || o.Refresh == nil || o.Refresh.Retry != "any" {
			t.Errorf("%s: got %+v, want retry %q (the refresh's \"any\")", method, o, want)
		}
	}
}

func TestCodecMalformed(t *testing.T) {
	p := newPipeline()
	for _, m := range []string{``, `nul`, `[]`, `{"method":1}`, `{"method":"GET","path":"/v1/tiers","query":"","headers":[["a"]],"now":1}`,
		`{"method":"GET","path":"/v1/tiers","query":"","headers":[["a",1]],"now":1}`, `{"method":"GET","path":"/v1/tiers","query":"","now":1.5}`,
		`{"method":"GET","path":"/v1/tiers","query":""}`, `{"method":"GET","path":"/v1/tiers","query":"","headers":` + strings.Repeat("[", 100) + `}`} {
		o := decodeOut(t, p.HandleStart([]byte(m)))
		if o.Kind != "response" || o.Status != 500 {
			t.Errorf("start %.60q: got %+v, want 500", m, o)
		}
	}
	big := `{"method":"GET","path":"/v1/tiers","query":"","headers":[["X-A","` + strings.Repeat("a", MaxMessage) + `"]],"now":1}`
	if o := decodeOut(t, p.HandleStart([]byte(big))); o.Status != 400 {
		t.Errorf("oversized start: got %d, want 400", o.Status)
	}
	for _, m := range []string{``, `{}`, `{"handle":0}`, `{"handle":-1}`, `{"handle":"1"}`, `{"handle":1e20}`, `{"handle":12,"status":200,"now":1}`} {
		o := decodeOut(t, p.HandleResume([]byte(m)))
		if o.Kind != "response" || o.Status != 500 {
			t.Errorf("resume %q: got %+v, want 500", m, o)
		}
	}
	// A malformed resume for a forward in flight is that forward failing.
	s := decodeOut(t, p.HandleStart([]byte(fmt.Sprintf(`{"method":"GET","path":"/v1/openapi.json","query":"","now":%d}`, t0ms))))
	o := decodeOut(t, p.HandleResume([]byte(fmt.Sprintf(`{"handle":%d,"status":"200","now":%d}`, s.Handle, t0ms))))
	if o.Status != 500 || o.Handle != s.Handle || !strings.Contains(*o.Body, "could not be reached") {
		t.Errorf("malformed forward answer: got %+v", o)
	}
}

// FuzzHandle feeds arbitrary messages to both entry points of one
// pipeline, which must never panic and must always answer one JSON
// object of a known kind.
func FuzzHandle(f *testing.F) {
	tok := sign("k1", t0, nil)
	f.Add([]byte(fmt.Sprintf(`{"method":"GET","path":"/v1/subjects","query":"limit=5","headers":[["Authorization","Bearer %s"]],"now":%d}`, tok, t0ms)), []byte(`{"handle":1,"status":200,"body":`+string(mustJSON(string(tokentest.JWKS("k1"))))+`,"now":1793534400000}`))
	f.Add([]byte(`{"method":"HEAD","path":"/v1/tiers","query":"","now":1}`), []byte(`{"handle":1,"wake":true,"now":1}`))
	f.Add([]byte(`{"method":"GET","path":"/.well-known/oauth-protected-resource","query":"a=%","headers":[["Connection","x"],["x","y"]],"now":9}`), []byte(`{"handle":1,"status":0,"error":"boom","now":10}`))
	f.Add([]byte(`{"method":"GET","path":"/v1/subjects/a","query":"","headers":[["If-None-Match","*"],["Authorization","Bearer a.b.c"]],"now":1793534400000}`), []byte(`{"handle":2,"status":204,"headers":[["X-Lectern-Org","o"]],"now":1793534400001}`))
	// Past the set's max age: a background refresh, then its answer.
	stale := t0.Add(2 * time.Hour).UnixMilli()
	f.Add([]byte(fmt.Sprintf(`{"method":"GET","path":"/v1/subjects","query":"","headers":[["Authorization","Bearer %s"]],"now":%d}`, sign("k1", t0.Add(2*time.Hour), nil), stale)), []byte(fmt.Sprintf(`{"handle":2,"status":200,"body":%s,"now":%d}`, mustJSON(string(tokentest.JWKS("k1"))), stale+1)))
	f.Fuzz(func(t *testing.T, start, resume []byte) {
		p := newPipeline()
		installKeys(t, p, t0, "k1")
		for i := 0; i < 2; i++ {
			// Each output is read before the next call, which reuses its buffer.
			for _, call := range []struct {
				handle func([]byte) []byte
				msg    []byte
			}{{p.HandleStart, start}, {p.HandleResume, resume}} {
				out := call.handle(call.msg)
				var o map[string]any
				if err := json.Unmarshal(out, &o); err != nil {
					t.Fatalf("output %q: %v", out, err)
				}
				switch o["kind"] {
				case "response", "subrequest", "park", "done":
				default:
					t.Fatalf("output %s: unknown kind", out)
				}
			}
		}
		if len(p.pending) > 2 {
			t.Fatalf("%d pending after 2 starts", len(p.pending))
		}
	})
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// The caches keep what they need, not the messages it came in: a token
// cached from a request with a 64 KiB header costs the token, not the
// header.
func TestCachesKeepNoMessage(t *testing.T) {
	p := newPipeline()
	installKeys(t, p, t0, "k1")
	cookie := strings.Repeat("c", 64<<10)
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	const n = 64
	for i := range n {
		tok := sign("k1", t0, claims{"jti": fmt.Sprint("j", i)})
		msg := fmt.Sprintf(`{"method":"GET","path":"/v1/subjects","query":"limit=0","headers":[["Authorization","Bearer %s"],["Cookie",%q]],"now":%d}`, tok, cookie, t0ms)
		if o := decodeOut(t, p.HandleStart([]byte(msg))); o.Status != 400 {
			t.Fatalf("got %+v, want the local 400", o)
		}
	}
	if len(p.tokens.m) != n {
		t.Fatalf("%d tokens cached, want %d", len(p.tokens.m), n)
	}
	// Each forward's answer teaches the org cache (X-Lectern-*), from a
	// resume message with a 64 KiB header besides.
	for i := range n {
		tok := sign("k1", t0, claims{"jti": fmt.Sprint("f", i), "org": fmt.Sprint("org", i)})
		start := fmt.Sprintf(`{"method":"GET","path":"/v1/tiers","query":"","headers":[["Authorization","Bearer %s"]],"now":%d}`, tok, t0ms)
		o := decodeOut(t, p.HandleStart([]byte(start)))
		resume := fmt.Sprintf(`{"handle":%d,"status":200,"headers":[["X-Lectern-Org","org%d"],["X-Lectern-Grants","00ff"],["X-Service-Content-Version","v%d"],["Set-Cookie",%q]],"now":%d}`,
			o.Handle, i, i, cookie, t0ms+1)
		if o := decodeOut(t, p.HandleResume([]byte(resume))); o.Status != 200 {
			t.Fatalf("got %+v, want the forwarded 200", o)
		}
	}
	if len(p.orgs.m) != n {
		t.Fatalf("%d organisations cached, want %d", len(p.orgs.m), n)
	}
	withOrgs := heap()
	p.orgs = newOrgCache(MaxOrgs)
	if held := int64(withOrgs) - int64(heap()); held > n*16<<10 { // a kept message would be 64 KiB each
		t.Errorf("the org cache holds %d KiB for %d organisations: it keeps the messages they came in", held>>10, n)
	}
	// What the cache holds: the heap with it, less the heap without it.
	with := heap()
	p.tokens = newTokenCache(MaxTokens)
	if held := int64(with) - int64(heap()); held > n*16<<10 { // a kept message would be 64 KiB each
		t.Errorf("the token cache holds %d KiB for %d tokens: it keeps the messages they came in", held>>10, n)
	}
}
