package wasmtest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/lectern-api/lectern/shared/link"
)

// scenario is one request made through the edge and directly to the
// origin; both must answer alike.
type scenario struct {
	name   string
	method string
	target string   // path and query
	auth   string   // a key of the tokens map, "" for none, or "raw:<Authorization value>"
	hdr    []string // more header fields, name then value
	body   string
	status int    // the status both must give; 0: any, as long as they agree
	code   string // the error code both must give, when status says an error
	// fresh, when set, matches what two answers may not share: the
	// parts of a minted link that name its own ledger row and expiry. It
	// is masked in both bodies before they are compared, and
	// Content-Length is then not compared.
	fresh *regexp.Regexp
}

// compare holds an edge answer to the direct one: same status, body and
// headers but Date and the X-Request-Id value (the test sends the same id
// to both, so the bodies' requestId agree). Content-Length may differ
// only when the encoding does.
func compare(t *testing.T, name string, viaEdge, direct answer) {
	t.Helper()
	if viaEdge.status != direct.status {
		t.Errorf("%s: status edge %d, direct %d\nedge:   %.400s\ndirect: %.400s", name, viaEdge.status, direct.status, viaEdge.body, direct.body)
		return
	}
	if !bytes.Equal(viaEdge.body, direct.body) {
		t.Errorf("%s: bodies differ\nedge:   %.600q\ndirect: %.600q", name, viaEdge.body, direct.body)
	}
	for k := range viaEdge.header {
		if strings.HasPrefix(http.CanonicalHeaderKey(k), "X-Lectern-") {
			t.Errorf("%s: the edge leaked %s: %q", name, k, viaEdge.header[k])
		}
	}
	if (viaEdge.header.Get("X-Request-Id") == "") != (direct.header.Get("X-Request-Id") == "") {
		t.Errorf("%s: X-Request-Id edge %q, direct %q", name, viaEdge.header.Get("X-Request-Id"), direct.header.Get("X-Request-Id"))
	}
	sameEncoding := viaEdge.header.Get("Content-Encoding") == direct.header.Get("Content-Encoding")
	keys := map[string]bool{}
	for k := range viaEdge.header {
		keys[k] = true
	}
	for k := range direct.header {
		keys[k] = true
	}
	for k := range keys {
		switch {
		case k == "Date", k == "X-Request-Id", k == "Content-Length" && !sameEncoding:
			continue
		}
		if e, d := viaEdge.header[k], direct.header[k]; !slices.Equal(e, d) {
			t.Errorf("%s: header %s: edge %q, direct %q", name, k, e, d)
		}
	}
}

// parity runs each scenario through e and against o and compares.
func parity(t *testing.T, e *edge, o *origin, tokens map[string]string, prefix string, scenarios []scenario) {
	t.Helper()
	for i, sc := range scenarios {
		hdr := append([]string{"X-Request-Id", fmt.Sprintf("%s-%03d-parity", prefix, i)}, sc.hdr...)
		switch {
		case strings.HasPrefix(sc.auth, "raw:"):
			hdr = append(hdr, "Authorization", sc.auth[4:])
		case sc.auth != "":
			tok, ok := tokens[sc.auth]
			if !ok {
				t.Fatalf("%s: no token %q", sc.name, sc.auth)
			}
			hdr = append(hdr, "Authorization", "Bearer "+tok)
		}
		viaEdge := do(t, e.url, sc.method, sc.target, sc.body, hdr...)
		direct := do(t, o.api, sc.method, sc.target, sc.body, hdr...)
		if sc.fresh != nil {
			for _, a := range []*answer{&viaEdge, &direct} {
				a.body = sc.fresh.ReplaceAll(a.body, []byte("…"))
				a.header.Del("Content-Length")
			}
		}
		if sc.status != 0 && (direct.status != sc.status || sc.code != "" && direct.code() != sc.code) {
			t.Errorf("%s: %s %s: the origin answered %d %s, the scenario wants %d %s: %.300s",
				sc.name, sc.method, sc.target, direct.status, direct.code(), sc.status, sc.code, direct.body)
		}
		compare(t, sc.name+" ("+sc.method+" "+sc.target+")", viaEdge, direct)
	}
}

// fixture is an organisation per build with the tokens the scenarios use.
type fixture struct {
	org    string
	tokens map[string]string
}

const allTiers = `["topics","college","high","middle","primary"]`

func newFixture(t *testing.T, o *origin, org string) fixture {
	t.Helper()
	f := fixture{org: org, tokens: map[string]string{}}
	id, sec := o.org(t, `{"orgId":"`+org+`","contentGrants":`+allTiers+`}`,
		"content.read", "testprep.read", "content.export", "media.download")
	f.tokens["full"] = o.token(t, id, sec, "content.read", "testprep.read", "content.export", "media.download")
	f.tokens["content"] = o.token(t, id, sec, "content.read")
	f.tokens["narrow"] = o.token(t, id, sec, "testprep.read")
	sid, ssec := o.org(t, `{"orgId":"`+org+`-susp","status":"suspended","contentGrants":`+allTiers+`}`, "content.read")
	f.tokens["suspended"] = o.token(t, sid, ssec, "content.read")
	gid, gsec := o.org(t, `{"orgId":"`+org+`-gone","contentGrants":`+allTiers+`}`, "content.read")
	f.tokens["gone"] = o.token(t, gid, gsec, "content.read")
	if code, _ := o.adminCall(t, "DELETE", "/admin/v1/orgs/"+org+"-gone", ""); code != 204 {
		t.Fatalf("delete org: %d", code)
	}
	return f
}

// forged returns tokens that fail verification in particular ways, built
// from a genuine one.
func forged(tok string) map[string]string {
	parts := strings.Split(tok, ".")
	enc := base64.RawURLEncoding
	unknownKid := enc.EncodeToString([]byte(`{"alg":"RS256","kid":"no-such-key","typ":"JWT"}`)) + "." + parts[1] + "." + parts[2]
	none := enc.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + parts[1] + "."
	return map[string]string{
		"tampered":    parts[0] + "." + parts[1] + "x." + parts[2],
		"unknown-kid": unknownKid,
		"alg-none":    none,
	}
}

// TestParity: the scenario table through the edge and directly. Every
// answer the edge gives itself (404, 405, 401, 403 insufficient_scope,
// 400) and every answer it forwards (gate codes, 200s, compression)
// must be the origin's.
func TestParity(t *testing.T) {
	forEachBuild(t, func(t *testing.T, b *build) {
		o := shared(t)
		f := newFixture(t, o, "parity-"+b.name)
		for k, v := range forged(f.tokens["content"]) {
			f.tokens[k] = v
		}
		e := newEdge(t, b, o, nil)
		scenarios := fixedScenarios()
		scenarios = append(scenarios, servedScenarios(t, o, f)...)
		scenarios = append(scenarios, progressScenarios(t, o, f)...)
		scenarios = append(scenarios, fileScenarios(t, o, f)...)
		parity(t, e, o, f.tokens, "p"+b.name, scenarios)
		if st := e.host.Stats(); st.Failures != 0 {
			t.Errorf("the host failed %d requests", st.Failures)
		}
	})
}

// fixedScenarios are the errors of the pipeline's front, and the gate
// codes.
func fixedScenarios() []scenario {
	sub := content.Subjects[0]
	lesson := fmt.Sprintf("/v1/lessons/%s/%s/1", sub.Tier, sub.Slug)
	media := sub.Lessons[0].Media
	return []scenario{
		// Routing: 404 NOT_FOUND and 405, before authentication.
		{name: "unknown route", method: "GET", target: "/v1/teachers", status: 404, code: "NOT_FOUND"},
		{name: "unknown route, with token", method: "GET", target: "/v1/teachers", auth: "content", status: 404, code: "NOT_FOUND"},
		{name: "root", method: "GET", target: "/", status: 404, code: "NOT_FOUND"},
		{name: "trailing slash", method: "GET", target: "/v1/tiers/", auth: "content"},
		{name: "internal endpoint from a client", method: "POST", target: "/internal/gate", auth: "content", status: 404, code: "NOT_FOUND"},
		{name: "POST on a GET route", method: "POST", target: "/v1/tiers", auth: "content", status: 405, code: "METHOD_NOT_ALLOWED"},
		{name: "HEAD", method: "HEAD", target: "/v1/tiers", auth: "content", status: 405},
		{name: "DELETE", method: "DELETE", target: "/v1/license", status: 405, code: "METHOD_NOT_ALLOWED"},
		{name: "GET on the PUT route", method: "GET", target: "/v1/progress/high/x/1", status: 405, code: "METHOD_NOT_ALLOWED"},

		// Authentication: 401 invalid_token with the challenge.
		{name: "no token", method: "GET", target: "/v1/tiers", status: 401, code: "invalid_token"},
		{name: "Basic", method: "GET", target: "/v1/tiers", auth: "raw:Basic YTpi", status: 401, code: "invalid_token"},
		{name: "two tokens", method: "GET", target: "/v1/tiers", auth: "raw:Bearer a b", status: 401, code: "invalid_token"},
		{name: "malformed", method: "GET", target: "/v1/tiers", auth: "raw:Bearer abc", status: 401, code: "invalid_token"},
		{name: "empty bearer", method: "GET", target: "/v1/tiers", auth: "raw:Bearer ", status: 401, code: "invalid_token"},
		{name: "tampered", method: "GET", target: "/v1/tiers", auth: "tampered", status: 401, code: "invalid_token"},
		{name: "unknown kid", method: "GET", target: "/v1/tiers", auth: "unknown-kid", status: 401, code: "invalid_token"},
		{name: "alg none", method: "GET", target: "/v1/tiers", auth: "alg-none", status: 401, code: "invalid_token"},

		// Scope: 403 insufficient_scope.
		{name: "scope", method: "GET", target: "/v1/tiers", auth: "narrow", status: 403, code: "insufficient_scope"},
		{name: "scope, testprep items", method: "GET", target: "/v1/testprep/act/items", auth: "content", status: 403, code: "insufficient_scope"},
		{name: "scope, export", method: "GET", target: "/v1/exports/subjects/" + sub.Slug, auth: "content", status: 403, code: "insufficient_scope"},
		{name: "learner route, machine token", method: "GET", target: "/v1/progress", auth: "full", status: 0},

		// Syntactic validation: 400.
		{name: "limit=0", method: "GET", target: "/v1/subjects?limit=0", auth: "content", status: 400, code: "BAD_REQUEST"},
		{name: "limit=101", method: "GET", target: "/v1/search?q=cell&limit=101", auth: "content", status: 400, code: "BAD_REQUEST"},
		{name: "unknown parameter", method: "GET", target: "/v1/tiers?bogus=1", auth: "content", status: 400, code: "BAD_REQUEST"},
		{name: "bad include", method: "GET", target: lesson + "?include=everything", auth: "content", status: 400, code: "BAD_REQUEST"},
		{name: "bad detail", method: "GET", target: lesson + "?detail=FULL", auth: "content", status: 400, code: "BAD_REQUEST"},
		{name: "search without q", method: "GET", target: "/v1/search", auth: "content", status: 400, code: "BAD_REQUEST"},
		{name: "search, long q", method: "GET", target: "/v1/search?q=" + strings.Repeat("a", 201), auth: "content", status: 400, code: "BAD_REQUEST"},
		{name: "repeated parameter", method: "GET", target: "/v1/search?q=a&q=b", auth: "content", status: 400},
		{name: "bad cursor", method: "GET", target: "/v1/subjects?cursor=!!!", auth: "content", status: 0},

		// The organisation gate (the origin's; forwarded as it answers).
		{name: "suspended", method: "GET", target: "/v1/tiers", auth: "suspended", status: 403, code: "ORG_SUSPENDED"},
		{name: "suspended, licence answers", method: "GET", target: "/v1/license", auth: "suspended", status: 200},
		{name: "no organisation", method: "GET", target: "/v1/tiers", auth: "gone", status: 403, code: "NO_ORGANIZATION"},

		// Resolution and existence, at the origin.
		{name: "unknown subject", method: "GET", target: "/v1/subjects/no-such-subject", auth: "content"},
		{name: "unknown lesson", method: "GET", target: fmt.Sprintf("/v1/lessons/%s/%s/999", sub.Tier, sub.Slug), auth: "content"},
		{name: "bad class number", method: "GET", target: fmt.Sprintf("/v1/lessons/%s/%s/0x1", sub.Tier, sub.Slug), auth: "content"},
		{name: "unknown test", method: "GET", target: "/v1/testprep/no-such-test/items", auth: "full"},
		{name: "export, unknown subject", method: "GET", target: "/v1/exports/subjects/no-such-subject", auth: "full", status: 404, code: "UNKNOWN_SUBJECT"},
		{name: "export, unknown class", method: "GET", target: fmt.Sprintf("/v1/exports/classes/%s/%s/999?format=inline", sub.Tier, sub.Slug), auth: "full", status: 404, code: "LESSON_NOT_FOUND"},
		{name: "export, bad format", method: "GET", target: "/v1/exports/subjects/" + sub.Slug + "?format=tar", auth: "full", status: 400, code: "BAD_REQUEST"},
		{name: "export inline, If-None-Match: *", method: "GET", target: fmt.Sprintf("/v1/exports/classes/%s/%s/1?format=inline", sub.Tier, sub.Slug), auth: "full",
			hdr: []string{"If-None-Match", "*"}, status: 304},

		// A body crosses the edge to the origin, untouched.
		{name: "POST with a body", method: "POST", target: "/v1/media/urls", auth: "full", hdr: []string{"Content-Type", "application/json"},
			body: `{"mediaIds":["m_does_not_exist"],"expiresIn":900}`},
		{name: "POST with a body, wrong scope", method: "POST", target: "/v1/media/urls", auth: "content",
			body: `{"mediaIds":["x"]}`, status: 403, code: "insufficient_scope"},
		{name: "mint", method: "POST", target: "/v1/media/urls", auth: "full", status: 200, fresh: mintFresh,
			body: `{"mediaIds":["` + media[0].ID + `","` + media[1].ID + `","` + media[0].ID + `"],"expiresIn":600}`},
		{name: "mint, unknown media", method: "POST", target: "/v1/media/urls", auth: "full", status: 404, code: "UNKNOWN_MEDIA",
			body: `{"mediaIds":["` + media[0].ID + `","` + sub.Lessons[0].ID + `#no-such-card#video"]}`},
		{name: "mint, malformed id", method: "POST", target: "/v1/media/urls", auth: "full", status: 400, code: "BAD_LESSON_ID",
			body: `{"mediaIds":["` + media[0].ID + `","` + sub.Tier + `/` + sub.Slug + `/0#c1#video"]}`},
		{name: "mint, batch too large", method: "POST", target: "/v1/media/urls", auth: "full", status: 400, code: "BATCH_TOO_LARGE",
			body: `{"mediaIds":[` + strings.Repeat(`"a",`, 100) + `"a"]}`},
		{name: "mint, expiresIn too small", method: "POST", target: "/v1/media/urls", auth: "full", status: 400, code: "BAD_REQUEST",
			body: `{"mediaIds":["` + media[0].ID + `"],"expiresIn":59}`},

		// Outside /v1.
		{name: "protected resource metadata", method: "GET", target: "/.well-known/oauth-protected-resource", status: 200},
	}
}

// mintFresh matches what two mints of one batch do not share: each link's
// expiry, ledger row and signature, and the expiry in the answer (the
// two requests may be a second apart).
var mintFresh = regexp.MustCompile(`x=[0-9]+&r=[0-9]+|&s=[A-Za-z0-9_-]+|"expiresAt":"[^"]*"`)

// servedScenarios asks for every GET route of the OpenAPI document (its
// paths under /v1/) with real path values, plainly and compressed. A
// route the origin does not serve yet answers 404, through the edge as
// directly.
func servedScenarios(t *testing.T, o *origin, f fixture) []scenario {
	t.Helper()
	doc := do(t, o.api, "GET", "/v1/openapi.json", "")
	if doc.status != 200 {
		t.Fatalf("GET /v1/openapi.json: %d", doc.status)
	}
	var spec struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(doc.body, &spec); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	sub := content.Subjects[0]
	var word string // a word of a lesson title: search finds it
	if f := strings.Fields(sub.Lessons[0].Title); len(f) > 0 {
		word = strings.ToLower(f[len(f)-1])
	}
	vars := strings.NewReplacer("{tier}", sub.Tier, "{subjectSlug}", sub.Slug, "{classNum}", "1", "{test}", content.Tests[0].ID)
	queries := map[string]string{
		"/v1/search":                         "?q=" + word,
		"/v1/subjects/{subjectSlug}":         "?tier=" + sub.Tier,
		"/v1/subjects/{subjectSlug}/classes": "?tier=" + sub.Tier,
		// The inline form: its bytes are the same on every request (a
		// zip_url result names a new ledger row each time).
		"/v1/exports/subjects/{subjectSlug}":                  "?tier=" + sub.Tier + "&format=inline",
		"/v1/exports/classes/{tier}/{subjectSlug}/{classNum}": "?format=inline",
	}
	var paths []string
	for p, ops := range spec.Paths {
		// The download links under /files/ are described too; they need a
		// signed link, which fileScenarios mints.
		if _, ok := ops["get"]; ok && strings.HasPrefix(p, "/v1/") {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	var out []scenario
	served := 0
	for _, p := range paths {
		target := vars.Replace(p) + queries[p]
		probe := do(t, o.api, "GET", target, "", "Authorization", "Bearer "+f.tokens["full"])
		if probe.status == 404 && strings.Contains(string(probe.body), "does not serve") {
			t.Logf("not served by the origin yet: GET %s", p)
		} else {
			served++
		}
		out = append(out,
			scenario{name: "GET " + p, method: "GET", target: target, auth: "full"},
			scenario{name: "GET " + p + " gzip", method: "GET", target: target, auth: "full", hdr: []string{"Accept-Encoding", "gzip"}},
			scenario{name: "GET " + p + " br", method: "GET", target: target, auth: "full", hdr: []string{"Accept-Encoding", "br;q=1, gzip;q=0.5"}},
		)
	}
	if served == 0 {
		t.Fatal("the origin serves no GET route of its OpenAPI document")
	}
	t.Logf("%d GET routes, %d served", len(paths), served)
	return out
}

// fileScenarios are download links (/files/): a media link's GET, HEAD,
// ranges (206, 416) and revalidation, which the edge forwards, and the
// refusals it answers itself (altered, unknown key, expired: 404; a
// method other than GET or HEAD: 405); a valid link to an asset the
// corpus lacks (the origin's 404); and an export's zip link, GET and HEAD
// (whose Content-Length is the zip's). Links are signed with the key
// both tiers derive from the secret, on the origin's clock.
func fileScenarios(t *testing.T, o *origin, f fixture) []scenario {
	t.Helper()
	keys := link.Derived([]byte(secret))
	m := content.Lessons[0].Media[0]
	org, gen := mintedOrg(t, o, f.tokens["full"], m.ID)
	sign := func(media string, ttl time.Duration) string {
		return keys.Sign(link.Link{Kind: link.Media, Expires: o.now().Add(ttl).Unix(), Row: 1, Name: "asset", Media: media, Org: org, Gen: gen})
	}
	good := sign(m.ID, time.Hour)
	size := fmt.Sprint(m.Bytes)
	sub := content.Subjects[0]
	x := do(t, o.api, "GET", "/v1/exports/classes/"+sub.Tier+"/"+sub.Slug+"/1", "", "Authorization", "Bearer "+f.tokens["full"])
	var res struct{ URL string }
	i := strings.Index(string(x.body), link.Prefix)
	if x.status != 200 || json.Unmarshal(x.body, &res) != nil || i < 0 {
		t.Fatalf("export: %d %s", x.status, x.body)
	}
	zipLink := res.URL[strings.Index(res.URL, link.Prefix):]
	return []scenario{
		{name: "media link", method: "GET", target: good, status: 200},
		{name: "media link, HEAD", method: "HEAD", target: good, status: 200},
		{name: "media link, range", method: "GET", target: good, hdr: []string{"Range", "bytes=2-5"}, status: 206},
		{name: "media link, suffix range", method: "GET", target: good, hdr: []string{"Range", "bytes=-3"}, status: 206},
		{name: "media link, range past the end", method: "GET", target: good, hdr: []string{"Range", "bytes=" + size + "-"}, status: 416},
		{name: "media link, If-None-Match: *", method: "GET", target: good, hdr: []string{"If-None-Match", "*"}, status: 304},
		{name: "media link, with a token", method: "GET", target: good, auth: "content", status: 200},
		{name: "media link, altered", method: "GET", target: strings.Replace(good, "&r=1&", "&r=2&", 1), status: 404, code: "NOT_FOUND"},
		{name: "media link, altered, HEAD", method: "HEAD", target: strings.Replace(good, "&r=1&", "&r=2&", 1), status: 404},
		{name: "media link, unknown key", method: "GET", target: strings.Replace(good, "?k=s&", "?k=gone&", 1), status: 404, code: "NOT_FOUND"},
		{name: "media link, expired", method: "GET", target: sign(m.ID, -time.Second), status: 404, code: "NOT_FOUND"},
		{name: "media link, POST", method: "POST", target: good, status: 405, code: "METHOD_NOT_ALLOWED"},
		{name: "media link, DELETE", method: "DELETE", target: good, status: 405, code: "METHOD_NOT_ALLOWED"},
		{name: "media link, asset not in the corpus", method: "GET", target: sign(sub.Lessons[0].ID+"#no-such-card#video", time.Hour), status: 404, code: "NOT_FOUND"},
		{name: "malformed link", method: "GET", target: link.Prefix + "m/x", status: 404, code: "NOT_FOUND"},
		{name: "export link", method: "GET", target: zipLink, status: 200},
		{name: "export link, HEAD", method: "HEAD", target: zipLink, status: 200},
	}
}
