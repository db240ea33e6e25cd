package pipeline

import (
	"strings"
	"testing"
	"time"

	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/edgesig"
	"github.com/lectern-api/lectern/shared/link"
)

const testURLKeys = "new=edge-test-url-key-new-0123456789abcdef,old=edge-test-url-key-old-0123456789abcdef"

func mustURLKeys(t *testing.T, s string) link.Keys {
	t.Helper()
	k, err := link.ParseKeys(s)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// signedLink is a media link signed by keys, expiring at exp: its path
// and query.
func signedLink(keys link.Keys, exp time.Time) (string, string) {
	s := keys.Sign(link.Link{Kind: link.Media, Expires: exp.Unix(), Row: 5, Name: "c1.mp4", Media: "high/algebra/1#c1#video", Org: "acme"})
	path, query, _ := strings.Cut(s, "?")
	return path, query
}

func filesPipeline(t *testing.T) *Pipeline {
	cfg := testCfg
	cfg.Random = &counter{}
	cfg.URLKeys = mustURLKeys(t, testURLKeys)
	return New(cfg)
}

// A valid link is forwarded with no token and nothing else checked; the
// origin's answer passes through.
func TestDownloadForwarded(t *testing.T) {
	p := filesPipeline(t)
	// The second key verifies (rotation); no JWKS is installed: no token
	// is looked at.
	path, query := signedLink(mustURLKeys(t, "old=edge-test-url-key-old-0123456789abcdef"), t0.Add(time.Minute))
	for _, method := range []string{"GET", "HEAD"} {
		out := p.Start(Request{Method: method, Path: path, Query: query, Now: t0ms, Headers: []Header{{"Range", "bytes=0-9"}}})
		wantKind(t, out, Subrequest)
		if !out.Forward || out.Method != method || out.URL != "http://origin.test"+path+"?"+query {
			t.Fatalf("%s: got %s %s forward=%v", method, out.Method, out.URL, out.Forward)
		}
		h := headerMap(t, out.Headers)
		keys := edgesig.KeysOf([]byte(testCfg.Secret))
		m := edgesig.Message{Purpose: edgesig.Forward, Method: method, Host: "origin.test", Target: path + "?" + query, RequestID: h["X-Request-Id"],
			Header: sentFields(h)}
		if _, err := edgesig.Verify(&keys, h[edgesig.Header], &m, t0ms); h["Range"] != "bytes=0-9" || err != nil {
			t.Errorf("%s: forwarded headers %v", method, h)
		}
		out = p.Resume(ResumeMsg{Handle: out.Handle, Status: 206, Now: t0ms + 5,
			Headers: []Header{{"Content-Range", "bytes 0-9/100"}, {"X-Request-Id", h["X-Request-Id"]}}})
		wantKind(t, out, Response)
		if !out.Passthrough || out.Status != 206 {
			t.Errorf("%s: got %+v, want a passthrough 206", method, out)
		}
	}
	if len(p.pending) != 0 {
		t.Errorf("%d pending after the answers", len(p.pending))
	}
}

// Refused at the edge, without a forward: the origin's 404 (shared/link's
// Refusal) or 405 in the API's error body.
func TestDownloadRefused(t *testing.T) {
	p := filesPipeline(t)
	keys := mustURLKeys(t, testURLKeys)
	exp := t0.Add(time.Minute)
	path, query := signedLink(keys, exp)
	expiredAt := exp.UnixMilli()
	for name, tc := range map[string]struct {
		method, path, query string
		now                 int64
		status              int
		word                string
	}{
		"expired":            {"GET", path, query, expiredAt, 404, "expired"},
		"a ms before":        {"GET", path, query, expiredAt - 1, 0, ""},
		"altered":            {"GET", path, strings.Replace(query, "r=5", "r=6", 1), t0ms, 404, "not valid"},
		"altered name":       {"GET", path + "x", query, t0ms, 404, "not valid"},
		"malformed":          {"GET", path, "", t0ms, 404, "not valid"},
		"under /files/ only": {"GET", "/files/", "", t0ms, 404, "not valid"},
		"unknown key":        {"GET", path, strings.Replace(query, "k=new", "k=gone", 1), t0ms, 404, "not valid"},
		"POST":               {"POST", path, query, t0ms, 405, "GET or HEAD"},
		"PUT":                {"PUT", path, query, t0ms, 405, "GET or HEAD"},
	} {
		out := p.Start(Request{Method: tc.method, Path: tc.path, Query: tc.query, Now: tc.now, Headers: []Header{{"X-Request-Id", rid}}})
		if tc.status == 0 {
			wantKind(t, out, Subrequest)
			p.Resume(ResumeMsg{Handle: out.Handle, Status: 200, Now: tc.now})
			continue
		}
		wantKind(t, out, Response)
		h := headerMap(t, out.Headers)
		if out.Status != tc.status || !strings.Contains(string(out.Body), tc.word) || h["X-Request-Id"] != rid {
			t.Errorf("%s: got %d %s (X-Request-Id %q), want %d saying %q", name, out.Status, out.Body, h["X-Request-Id"], tc.status, tc.word)
		}
		if tc.status == 405 && h["Allow"] != "GET, HEAD" {
			t.Errorf("%s: Allow %q", name, h["Allow"])
		}
		if tc.status == 404 {
			_, e := keys.Check(tc.method, tc.path, tc.query, time.UnixMilli(tc.now))
			if want := string(e.AppendJSON(nil, rid)); e.Code != apierr.NotFound || string(out.Body) != want {
				t.Errorf("%s: body %s, want shared/link's %s", name, out.Body, want)
			}
		}
	}
	if len(p.pending) != 0 {
		t.Errorf("%d pending after refusals", len(p.pending))
	}
}

// TestDownloadAcceptedSecret (#34, point 3): while LECTERN_SECRET is
// rotated, the edge checks links of the key derived from either secret,
// without urlKeys and with its entry "derived", as the origins do.
func TestDownloadAcceptedSecret(t *testing.T) {
	const other = "the-other-secret-of-the-rotation-0123456789"
	for _, urlKeys := range []string{"", ",\"urlKeys\":\"derived," + testURLKeys + "\""} {
		msg := `{"origin":"http://o","jwksUrl":"http://o/jwks","issuer":"http://o","audience":"a","secret":"` + testCfg.Secret +
			`","secretAccept":"` + other + `"` + urlKeys + `}`
		cfg, err := ParseConfig([]byte(msg))
		if err != nil {
			t.Fatalf("%s: %v", msg, err)
		}
		cfg.Random = &counter{}
		p := New(cfg)
		for name, secret := range map[string]string{"the secret": testCfg.Secret, "the accepted secret": other} {
			path, query := signedLink(link.Derived([]byte(secret)), t0.Add(time.Minute))
			if out := p.Start(get(path, query, t0ms)); out.Kind != Subrequest {
				t.Errorf("urlKeys %q: a link of %s's derived key: %s %d", urlKeys, name, out.Kind, out.Status)
			}
		}
		path, query := signedLink(link.Derived([]byte("a-third-secret-of-the-rotation-0123456789")), t0.Add(time.Minute))
		if out := p.Start(get(path, query, t0ms)); out.Kind != Response || out.Status != 404 {
			t.Errorf("urlKeys %q: a link of a third secret: %s %d", urlKeys, out.Kind, out.Status)
		}
	}
}

// Without urlKeys the edge checks with the key derived from the secret,
// as the origin does.
func TestDownloadDerivedKey(t *testing.T) {
	p := newPipeline()
	path, query := signedLink(link.Derived([]byte(testCfg.Secret)), t0.Add(time.Minute))
	wantKind(t, p.Start(get(path, query, t0ms)), Subrequest)
	path, query = signedLink(mustURLKeys(t, testURLKeys), t0.Add(time.Minute))
	if out := p.Start(get(path, query, t0ms)); out.Kind != Response || out.Status != 404 {
		t.Errorf("a link of a key the edge lacks: %s %d", out.Kind, out.Status)
	}
}
