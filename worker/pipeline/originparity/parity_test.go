package originparity

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/auth"
	"github.com/lectern-api/lectern/origin/server"
	"github.com/lectern-api/lectern/shared/link"
	"github.com/lectern-api/lectern/shared/token/tokentest"
	"github.com/lectern-api/lectern/worker/pipeline"
)

var (
	t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	rm = "http://edge.test/.well-known/oauth-protected-resource"
)

const iss, aud, rid = "http://idp.test", "lectern-api", "req-parity-01"

func sign(kid, scope string, exp time.Time) string {
	return tokentest.Mint(kid, tokentest.Claims{"iss": iss, "aud": aud, "sub": "c1", "client_id": "c1", "org": "acme",
		"scope": scope, "iat": t0.Unix(), "exp": exp.Unix()})
}

// TestLocalAnswersMatchOrigin runs each request through the origin's
// handler and through the edge pipeline (after one JWKS fetch) and wants
// the same status, headers (Date aside: the origin's handler under
// httptest writes none) and body.
func TestLocalAnswersMatchOrigin(t *testing.T) {
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(tokentest.JWKS("k1")) }))
	defer idp.Close()
	now := func() time.Time { return t0 }
	const secret = "parity-secret-parity-secret-0123"
	keys := link.Derived([]byte(secret)) // both tiers' when LECTERN_URL_KEYS is unset
	origin := server.New(server.Config{Auth: auth.New(auth.Config{Issuer: iss, Audience: aud, JWKSURL: idp.URL, Now: now}),
		Now: now, ResourceMetadataURL: rm, URLKeys: keys})
	edge := pipeline.New(pipeline.Config{Origin: "http://origin.test", JWKSURL: idp.URL, Issuer: iss, Audience: aud,
		Secret: secret, ResourceMetadata: rm})
	valid := keys.Sign(link.Link{Kind: link.Media, Expires: t0.Add(time.Hour).Unix(), Row: 3, Media: "high/x/1#c1#video", Org: "acme"})
	expired := keys.Sign(link.Link{Kind: link.Media, Expires: t0.Unix(), Row: 3, Media: "high/x/1#c1#video", Org: "acme"})
	// Warm the edge's JWKS as its first request would.
	ms := t0.UnixMilli()
	out := edge.Start(pipeline.Request{Method: "GET", Path: "/v1/tiers", Now: ms,
		Headers: []pipeline.Header{{Name: "Authorization", Value: "Bearer " + sign("k1", "service-api/content.read", t0.Add(time.Hour))}}})
	edge.Resume(pipeline.ResumeMsg{Handle: out.Handle, Status: 200, Body: tokentest.JWKS("k1"), Now: ms})

	good := "Bearer " + sign("k1", "service-api/content.read", t0.Add(900*time.Second))
	tests := []struct{ method, target, authz string }{
		{"GET", "/v1/nope", ""},
		{"GET", "/internal/gate", ""},
		{"GET", "/v1/tiers/", good},
		{"DELETE", "/v1/tiers", ""},
		{"HEAD", "/v1/media/urls", ""},
		{"PUT", "/v1/progress/high/x/1", ""},
		{"GET", "/v1/tiers", ""},
		{"GET", "/v1/tiers", "Basic eDp5"},
		{"GET", "/v1/tiers", "Bearer"},
		{"GET", "/v1/tiers", "Bearer a.b.c"},
		{"GET", "/v1/tiers", good[:len(good)-4] + "AAAA"},
		{"GET", "/v1/tiers", "Bearer " + sign("k9", "service-api/content.read", t0.Add(time.Hour))},
		{"GET", "/v1/tiers", "Bearer " + sign("k1", "service-api/content.read", t0.Add(-time.Minute))},
		{"GET", "/v1/testprep/act/items?limit=0", good},
		{"GET", "/v1/exports/classes/high/x/1", good},
		{"GET", "/v1/progress", "Bearer " + sign("k1", "service-api/progress.read", t0.Add(time.Hour))},
		{"GET", "/v1/subjects?limit=0", good},
		{"GET", "/v1/subjects?limit=abc&detail=x", good},
		{"GET", "/v1/subjects?limt=5", good},
		{"GET", "/v1/subjects?tier=high&tier=middle", good},
		{"GET", "/v1/search?q=", good},
		{"GET", "/v1/lessons/high/x/1?include=markdown", good},
		{"GET", "/v1/tiers?x=%zz", good},
		// Download links (shared/link): refused alike by both tiers.
		{"GET", strings.Replace(valid, "&r=3&", "&r=4&", 1), ""},
		{"GET", expired, ""},
		{"GET", "/files/", ""},
		{"POST", valid, good},
		{"DELETE", valid, ""},
	}
	for _, tt := range tests {
		r := httptest.NewRequest(tt.method, tt.target, nil)
		r.Header.Set("X-Request-Id", rid)
		if tt.authz != "" {
			r.Header.Set("Authorization", tt.authz)
		}
		rec := httptest.NewRecorder()
		origin.ServeHTTP(rec, r)

		req := pipeline.Request{Method: tt.method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery, Now: ms}
		for name, vs := range r.Header {
			req.Headers = append(req.Headers, pipeline.Header{Name: name, Value: vs[0]})
		}
		got := edge.Start(req)
		if got.Kind != pipeline.Response {
			t.Errorf("%s %s: edge gave %s, origin %d %s", tt.method, tt.target, got.Kind, rec.Code, rec.Body)
			continue
		}
		var oh, eh []string
		for name, vs := range rec.Header() {
			for _, v := range vs {
				oh = append(oh, name+": "+v)
			}
		}
		for _, h := range got.Headers {
			eh = append(eh, h.Name+": "+h.Value)
		}
		slices.Sort(oh)
		if got.Status != rec.Code || string(got.Body) != rec.Body.String() || !reflect.DeepEqual(oh, eh) {
			t.Errorf("%s %s:\norigin %d %q\n%q\n  edge %d %q\n%q", tt.method, tt.target, rec.Code, oh, rec.Body, got.Status, eh, got.Body)
		}
	}
}
