package main

// Hostile servers (#35, points 2 and 3): a server the sync talks to, or is
// sent to, may try to take its credentials, make it run forever or fill
// the disk. Each test here stands up such a server (httptest) and holds
// the sync to its bounds.

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const (
	fakeToken  = "tok-secret-0123456789"
	fakeID     = "client-id"
	fakeSecret = "client-secret"
)

// fakeAPI is a small Lectern API: discovery, a token endpoint, the licence
// status, one subject, its zip export and the export's download, each
// replaceable by path (hooks) to play a hostile server.
type fakeAPI struct {
	*httptest.Server
	t      *testing.T
	bundle []byte // served at /files/e/bundle
	hooks  map[string]http.HandlerFunc
}

func newFakeAPI(t *testing.T, hooks map[string]http.HandlerFunc) *fakeAPI {
	t.Helper()
	f := &fakeAPI{t: t, bundle: testBundle(t, "high/algebra", map[string][]byte{"lessons.json": []byte(`{"classes":[]}`)}), hooks: hooks}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	if h := f.hooks[r.URL.Path]; h != nil {
		h(w, r)
		return
	}
	authed := r.Header.Get("Authorization") == "Bearer "+fakeToken
	js := func(v any) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(v)
	}
	switch r.URL.Path {
	case "/.well-known/oauth-protected-resource":
		js(map[string]any{"resource": f.URL, "authorization_servers": []string{f.URL}})
	case "/.well-known/oauth-authorization-server":
		js(map[string]any{"issuer": f.URL, "token_endpoint": f.URL + "/token"})
	case "/token":
		if id, secret, ok := r.BasicAuth(); !ok || id != fakeID || secret != fakeSecret {
			http.Error(w, `{"error":"invalid_client"}`, 401)
			return
		}
		js(map[string]any{"access_token": fakeToken, "token_type": "Bearer", "expires_in": 3600})
	case "/v1/license":
		if !authed {
			w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+f.URL+`/.well-known/oauth-protected-resource"`)
			w.WriteHeader(401)
			return
		}
		js(map[string]any{"orgId": "org", "status": "active", "contentGrants": []string{"high"}, "contentVersion": "2026-01-01+aaaaaaaaaaaa",
			"quota": map[string]any{}, "rateLimits": map[string]any{}})
	case "/v1/subjects":
		js(map[string]any{"items": []map[string]any{{"slug": "algebra", "tier": "high", "classCount": 1,
			"contentDigest": "sha256:" + strings.Repeat("a", 64)}}, "hasMore": false, "nextCursor": nil})
	case "/v1/exports/subjects/algebra":
		js(map[string]any{"format": "zip_url", "url": f.URL + "/files/e/bundle?sig=s3cret", "classes": 1,
			"expiresAt": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
	case "/files/e/bundle":
		w.Header().Set("ETag", `"b1"`)
		http.ServeContent(w, r, "bundle.zip", time.Time{}, bytes.NewReader(f.bundle))
	default:
		http.NotFound(w, r)
	}
}

// cfg is the client configuration of a sync against f.
func (f *fakeAPI) cfg(l limits) clientConfig {
	return clientConfig{URL: f.URL, ClientID: fakeID, Secret: fakeSecret, Limits: l}
}

// env is the command's environment against f.
func (f *fakeAPI) env() func(string) string {
	return func(k string) string {
		return map[string]string{"LECTERN_URL": f.URL, "LECTERN_CLIENT_ID": fakeID, "LECTERN_CLIENT_SECRET": fakeSecret}[k]
	}
}

// testBundle is a zip export of subject holding files, as the origin makes
// it: the files and a manifest.json listing each with its size and sha256.
func testBundle(t *testing.T, subject string, files map[string][]byte) []byte {
	t.Helper()
	m := bundleManifest{ContentVersion: "2026-01-01+aaaaaaaaaaaa", Subject: subject}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, b := range files {
		sum := sha256.Sum256(b)
		m.Files = append(m.Files, struct {
			Name   string `json:"name"`
			Bytes  int64  `json:"bytes"`
			SHA256 string `json:"sha256"`
		}{name, int64(len(b)), hex.EncodeToString(sum[:])})
		w, _ := zw.Create(name)
		w.Write(b)
	}
	mb, _ := json.Marshal(m)
	w, _ := zw.Create("manifest.json")
	w.Write(mb)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// authRecorder is a hostile server: it answers everything 200 and records
// every Authorization header it is sent.
type authRecorder struct {
	*httptest.Server
	mu       sync.Mutex
	requests int
	auths    []string
}

func newAuthRecorder(t *testing.T, tlsServer bool) *authRecorder {
	a := &authRecorder{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.requests++
		if v := r.Header.Get("Authorization"); v != "" {
			a.auths = append(a.auths, v)
		}
		a.mu.Unlock()
		w.Write([]byte(`{}`))
	})
	if tlsServer {
		a.Server = httptest.NewTLSServer(h)
	} else {
		a.Server = httptest.NewServer(h)
	}
	t.Cleanup(a.Close)
	return a
}

func (a *authRecorder) seen() (int, []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.requests, append([]string(nil), a.auths...)
}

// trusting is the TLS configuration that trusts srv's certificate.
func trusting(srv *httptest.Server) *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	return &tls.Config{RootCAs: pool}
}

// asRemote has the sync see the loopback servers srvs as remote hosts, to
// which plain http is refused, until the test ends.
func asRemote(t *testing.T, srvs ...*httptest.Server) {
	old := loopback
	remote := map[string]bool{}
	for _, s := range srvs {
		u, _ := url.Parse(s.URL)
		remote[u.Host] = true
	}
	loopback = func(u *url.URL) bool { return !remote[u.Host] && old(u) }
	t.Cleanup(func() { loopback = old })
}

// A redirect off the API's origin, to another port or another scheme,
// never carries the token; a redirect off the token endpoint's never
// carries the client secret. Before the fix the oauth2 transport set the
// token on every hop and net/http kept the basic credentials on a
// redirect to the same host name at another port.
func TestCredentialsStayOnTheirOrigin(t *testing.T) {
	for _, tc := range []struct {
		name, path string
		status     int
		tls        bool
	}{
		{"subjects 302 to another port", "/v1/subjects", http.StatusFound, false},
		{"subjects 307 to https at another port", "/v1/subjects", http.StatusTemporaryRedirect, true},
		{"licence 308 to another port", "/v1/license", http.StatusPermanentRedirect, false},
		{"token endpoint 307 to another port", "/token", http.StatusTemporaryRedirect, false},
		{"export 302 to another port", "/v1/exports/subjects/algebra", http.StatusFound, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hostile := newAuthRecorder(t, tc.tls)
			var api *fakeAPI
			api = newFakeAPI(t, map[string]http.HandlerFunc{tc.path: func(w http.ResponseWriter, r *http.Request) {
				if tc.path == "/v1/license" && r.Header.Get("Authorization") == "" {
					// Discovery's call: the challenge, as the API answers it.
					w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+api.URL+`/.well-known/oauth-protected-resource"`)
					w.WriteHeader(401)
					return
				}
				http.Redirect(w, r, hostile.URL+"/steal", tc.status)
			}})
			l := limits{}
			if tc.tls {
				l.tls = trusting(hostile.Server)
			}
			_, err := syncDir(context.Background(), api.cfg(l), syncOptions{Dir: t.TempDir(), Quiet: true})
			t.Log(err)
			n, auths := hostile.seen()
			if len(auths) > 0 {
				t.Fatalf("the hostile host was sent %q", auths)
			}
			if err == nil || !strings.Contains(err.Error(), "refusing a redirect") {
				t.Errorf("sync: %v, want a refused redirect", err)
			}
			if n != 0 {
				t.Errorf("the hostile host was sent %d requests, want none", n)
			}
		})
	}
}

// The policies themselves: a credential goes to its origin (scheme, host
// and port) only, and nothing goes over plain http but to loopback.
func TestOriginPolicy(t *testing.T) {
	only := redirects(originOf("http://127.0.0.1:8080/v1"))
	for raw, ok := range map[string]bool{
		"http://127.0.0.1:8080/v1/subjects?cursor=x": true,
		"http://127.0.0.1:8081/steal":                false, // another port
		"https://127.0.0.1:8080/v1/subjects":         false, // another scheme
		"http://localhost:8080/v1/subjects":          false, // another host name
		"http://example.com:8080/v1/subjects":        false,
	} {
		u, _ := url.Parse(raw)
		if err := only(&http.Request{URL: u}, make([]*http.Request, 1)); (err == nil) != ok {
			t.Errorf("a redirect to %s: %v, want allowed %v", raw, err, ok)
		}
	}
	for raw, ok := range map[string]bool{
		"https://api.example/v1":       true,
		"http://127.0.0.1:9/x":         true,
		"http://[::1]:9/x":             true,
		"http://localhost/x":           true,
		"http://api.example/v1":        false,
		"http://10.0.0.1/files/e/x?s=": false,
		"ftp://api.example/x":          false,
	} {
		u, _ := url.Parse(raw)
		if err := secure(u); (err == nil) != ok {
			t.Errorf("secure(%s): %v, want allowed %v", raw, err, ok)
		}
	}
	if originOf("https://API.example/x") != originOf("https://api.example:443/y") || originOf("http://h/") == originOf("https://h/") {
		t.Error("origin: default ports and case")
	}
	// Under every client: a request carrying a credential to another
	// origin is refused even if a redirect policy let it through.
	g := &guard{base: http.DefaultTransport, creds: []string{originOf("http://127.0.0.1:1")}}
	req, _ := http.NewRequest("GET", "http://127.0.0.1:2/x", nil)
	req.Header.Set("Authorization", "Bearer x")
	if _, err := g.RoundTrip(req); err == nil || !strings.Contains(err.Error(), "refusing to send credentials") {
		t.Errorf("guard: %v", err)
	}
}

// Plain http to a host that is not loopback is refused: the export's
// link, a redirect of a loopback link to it, and LECTERN_URL itself.
func TestPlainHTTPRefused(t *testing.T) {
	files := newAuthRecorder(t, false)
	asRemote(t, files.Server)
	for _, tc := range []struct {
		name string
		link func(api *fakeAPI) string
	}{
		{"link", func(*fakeAPI) string { return files.URL + "/files/e/bundle?sig=s3cret" }},
		{"redirect", func(api *fakeAPI) string { return api.URL + "/files/e/moved?sig=s3cret" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var api *fakeAPI
			api = newFakeAPI(t, map[string]http.HandlerFunc{
				"/v1/exports/subjects/algebra": func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "application/json")
					json.NewEncoder(w).Encode(map[string]any{"format": "zip_url", "url": tc.link(api), "classes": 1,
						"expiresAt": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
				},
				"/files/e/moved": func(w http.ResponseWriter, r *http.Request) {
					http.Redirect(w, r, files.URL+"/files/e/bundle?sig=s3cret", http.StatusFound)
				},
			})
			_, err := syncDir(context.Background(), api.cfg(limits{}), syncOptions{Dir: t.TempDir(), Quiet: true})
			t.Log(err)
			if err == nil || !strings.Contains(err.Error(), "https only") {
				t.Errorf("sync: %v, want http refused", err)
			}
			if n, _ := files.seen(); n != 0 {
				t.Errorf("the plain-http host was sent %d requests", n)
			}
		})
	}
	t.Run("LECTERN_URL", func(t *testing.T) {
		_, err := syncDir(context.Background(), clientConfig{URL: files.URL, ClientID: fakeID, Secret: fakeSecret}, syncOptions{Dir: t.TempDir(), Quiet: true})
		if err == nil || !strings.Contains(err.Error(), "https") {
			t.Errorf("sync: %v, want http refused", err)
		}
		if n, _ := files.seen(); n != 0 {
			t.Errorf("the plain-http host was sent %d requests", n)
		}
	})
}

// endless is a handler that writes zeros until stop bytes (a safety stop
// for the test, far past every bound) or until the client goes, counting
// what it wrote; declared, when not 0, is its Content-Length.
func endless(written *atomic.Int64, declared, stop int64) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if declared != 0 {
			w.Header().Set("Content-Length", fmt.Sprint(declared))
		}
		w.WriteHeader(200)
		buf := make([]byte, 64<<10)
		for written.Load() < stop {
			n, err := w.Write(buf)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}
}

// A download never writes past its declared size: a chunked body past
// -max-download, past the size media-manifest.json lists, or a
// Content-Length over -max-download.
func TestEndlessDownload(t *testing.T) {
	const bound = 4 << 20
	const stop = 128 << 20
	plain := &http.Client{}
	setPlain(plain, limits{MaxDownload: bound}.orDefault())
	for _, tc := range []struct {
		name     string
		declared int64 // Content-Length
		size     int64 // as the manifest lists it; -1: a zip export
		want     string
		max      int64 // the most the part may hold after
	}{
		{"chunked export", 0, -1, "-max-download", bound},
		{"chunked media", 0, 1000, "declared size", 0},
		{"Content-Length over -max-download", 1 << 40, -1, "-max-download", 0},
		{"Content-Length other than the manifest's", 5000, 1000, "declared size", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var written atomic.Int64
			srv := httptest.NewServer(endless(&written, tc.declared, stop))
			defer srv.Close()
			part := filepath.Join(t.TempDir(), "part")
			_, err := fetchSized(context.Background(), plain, srv.URL+"/files/e/x", part, "", tc.size, nil, nil)
			t.Log(err)
			st, serr := os.Stat(part)
			if serr != nil {
				t.Fatal(serr)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("fetch: %v, want %q", err, tc.want)
			}
			if st.Size() > tc.max {
				t.Errorf("the part holds %d bytes, want at most %d", st.Size(), tc.max)
			}
			srv.Close() // waits for the handler: what it wrote is final
			// Past the bound, only what the sockets buffered (tcp_rmem's
			// maximum is 32 MiB on Linux) may have left the server.
			if w := written.Load(); w > bound+(40<<20) {
				t.Errorf("the server wrote %d bytes before the client went", w)
			}
		})
	}
}

// An endless JSON answer of the API ends at 16 MiB, and the error says so.
// Before the fix the typed client read whole bodies.
func TestEndlessJSON(t *testing.T) {
	var written atomic.Int64
	var api *fakeAPI
	api = newFakeAPI(t, map[string]http.HandlerFunc{"/v1/subjects": func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"items":[{"slug":"`))
		a := bytes.Repeat([]byte("a"), 64<<10)
		for written.Load() < 128<<20 {
			n, err := w.Write(a)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}})
	_, err := syncDir(context.Background(), api.cfg(limits{}), syncOptions{Dir: t.TempDir(), Quiet: true})
	t.Log(err)
	if err == nil || !strings.Contains(err.Error(), "16 MiB") {
		t.Errorf("sync: %v, want the 16 MiB bound", err)
	}
	api.Close()
	if w := written.Load(); w > maxJSON+(40<<20) {
		t.Errorf("the server wrote %d bytes before the client went", w)
	}
}

// bomb is a zip of one entry, lessons.json, of zeros: n of them, its
// header declaring header bytes, and a manifest listing listed bytes.
func bomb(t *testing.T, n, header, listed int64) []byte {
	t.Helper()
	// The zeros deflated, as a zip entry holds them.
	var z bytes.Buffer
	zw := zip.NewWriter(&z)
	w, _ := zw.CreateHeader(&zip.FileHeader{Name: "z", Method: zip.Deflate})
	zeros := make([]byte, 1<<20)
	for left := n; left > 0; left -= int64(len(zeros)) {
		w.Write(zeros[:min(left, int64(len(zeros)))])
	}
	zw.Close()
	zr, _ := zip.NewReader(bytes.NewReader(z.Bytes()), int64(z.Len()))
	rr, _ := zr.File[0].OpenRaw()
	deflated, _ := io.ReadAll(rr)

	// The bomb: that entry, written raw so that its header can lie.
	var buf bytes.Buffer
	zw = zip.NewWriter(&buf)
	w, err := zw.CreateRaw(&zip.FileHeader{Name: "lessons.json", Method: zip.Deflate, UncompressedSize64: uint64(header),
		CompressedSize64: uint64(len(deflated)), CRC32: zr.File[0].CRC32})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(deflated)
	m := fmt.Sprintf(`{"contentVersion":"v","subject":"high/algebra","files":[{"name":"lessons.json","bytes":%d,"sha256":"%s"}]}`, listed, strings.Repeat("0", 64))
	mw, _ := zw.Create("manifest.json")
	mw.Write([]byte(m))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// dirBytes is the bytes of the files under dir.
func dirBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// A zip whose entries are not of the sizes its manifest lists, or whose
// sizes pass the disk's free space, is refused before a byte is written.
// Before the fix, 64 MiB of zeros under a manifest listing 2^40 bytes
// were written before the sha256 refused them.
func TestZipBomb(t *testing.T) {
	const zeros = 64 << 20
	for _, tc := range []struct {
		name           string
		header, listed int64
		want           string
	}{
		{"manifest lists more than the zip holds", zeros, 1 << 40, "the manifest lists"},
		{"manifest lists less than the zip holds", zeros, 1000, "the manifest lists"},
		{"manifest and zip both claim a petabyte", 1 << 50, 1 << 50, "free on the disk"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			zipPath := filepath.Join(dir, "bundle.zip")
			if err := os.WriteFile(zipPath, bomb(t, zeros, tc.header, tc.listed), 0o644); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, "out")
			_, _, err := unpack(zipPath, out, "high/algebra")
			t.Log(err)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("unpack: %v, want %q", err, tc.want)
			}
			if n := dirBytes(out); n > 0 {
				t.Errorf("unpack wrote %d bytes", n)
			}
		})
	}
	// Through the sync: the bomb is refused, nothing of it is kept.
	api := newFakeAPI(t, nil)
	api.bundle = bomb(t, zeros, zeros, 1<<40)
	dir := t.TempDir()
	_, err := syncDir(context.Background(), api.cfg(limits{}), syncOptions{Dir: dir, Quiet: true})
	if err == nil || !strings.Contains(err.Error(), "verify high/algebra") {
		t.Errorf("sync: %v", err)
	}
	if n := dirBytes(dir); n > 1<<20 {
		t.Errorf("the mirror holds %d bytes", n)
	}
}

// runCmd runs lectern sync with args against env, its exit status, its
// standard error and how long it took; it fails the test if the command
// takes more than limit.
func runCmd(t *testing.T, env func(string) string, limit time.Duration, args ...string) (int, string, time.Duration) {
	t.Helper()
	type result struct {
		code int
		err  string
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		var out, errb bytes.Buffer
		code := run(context.Background(), append([]string{"sync", "-quiet"}, args...), env, &out, &errb)
		done <- result{code, errb.String()}
	}()
	select {
	case r := <-done:
		t.Logf("lectern sync %v: exit %d: %s", args, r.code, r.err)
		return r.code, r.err, time.Since(start)
	case <-time.After(limit):
		t.Fatalf("lectern sync %v still runs after %v", args, limit)
	}
	return 0, "", 0
}

// A server that accepts a connection and never answers, or sends part of
// a body and stalls, fails the sync within its timeouts: seconds, not the
// minute it took before the fix; the defaults are seconds too.
func TestSilentServer(t *testing.T) {
	for name, d := range map[string]time.Duration{"connect": defaultLimits.Connect, "header": defaultLimits.Header, "idle": defaultLimits.Idle} {
		if d <= 0 || d > 30*time.Second {
			t.Errorf("the default %s timeout is %v, want seconds", name, d)
		}
	}
	t.Run("accepts and never answers", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close() // held open, never answered
			}
		}()
		env := func(k string) string {
			return map[string]string{"LECTERN_URL": "http://" + ln.Addr().String(), "LECTERN_CLIENT_ID": fakeID, "LECTERN_CLIENT_SECRET": fakeSecret}[k]
		}
		code, stderr, took := runCmd(t, env, 15*time.Second, "-header-timeout", "1s", t.TempDir())
		if code != 1 || !strings.Contains(stderr, "-header-timeout 1s") || took > 5*time.Second {
			t.Errorf("exit %d after %v: %s", code, took, stderr)
		}
	})
	t.Run("stalls mid-body", func(t *testing.T) {
		quit := make(chan struct{})
		api := newFakeAPI(t, map[string]http.HandlerFunc{"/files/e/bundle": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "100000")
			w.Write(make([]byte, 1000))
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-quit:
			}
		}})
		t.Cleanup(func() { close(quit) }) // before the server's Close, which waits for its handlers
		code, stderr, took := runCmd(t, api.env(), 15*time.Second, "-idle-timeout", "1s", t.TempDir())
		if code != 1 || !strings.Contains(stderr, "-idle-timeout") || took > 5*time.Second {
			t.Errorf("exit %d after %v: %s", code, took, stderr)
		}
	})
}

// -timeout ends a sync a server keeps busy within every other bound: a
// download trickling a byte every 50 ms.
func TestOverallTimeout(t *testing.T) {
	quit := make(chan struct{})
	api := newFakeAPI(t, map[string]http.HandlerFunc{"/files/e/bundle": func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100000")
		for range 100000 {
			if _, err := w.Write([]byte{0}); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-time.After(50 * time.Millisecond):
			case <-r.Context().Done():
				return
			case <-quit:
				return
			}
		}
	}})
	t.Cleanup(func() { close(quit) })
	code, stderr, took := runCmd(t, api.env(), 20*time.Second, "-timeout", "2s", t.TempDir())
	if code != 1 || !strings.Contains(stderr, "the -timeout of 2s is reached") || took > 6*time.Second {
		t.Errorf("exit %d after %v: %s", code, took, stderr)
	}
}

// The bounds' flags parse sizes as people write them.
func TestByteSizeFlag(t *testing.T) {
	for in, want := range map[string]int64{"2GiB": 2 << 30, "512MiB": 512 << 20, "64 KiB": 64 << 10, "1048576": 1 << 20, "3g": 3 << 30} {
		var b byteSize
		if err := b.Set(in); err != nil || int64(b) != want {
			t.Errorf("Set(%q) = %d, %v; want %d", in, b, err, want)
		}
	}
	for _, in := range []string{"", "0", "-1", "2PB", "GiB", "1.5GiB"} {
		var b byteSize
		if err := b.Set(in); err == nil {
			t.Errorf("Set(%q) = %d, want an error", in, b)
		}
	}
	// A whole sync with the bounds set by flags, against a friendly server.
	api := newFakeAPI(t, nil)
	code, stderr, _ := runCmd(t, api.env(), 20*time.Second, "-timeout", "30s", "-connect-timeout", "2s", "-header-timeout", "2s",
		"-idle-timeout", "2s", "-max-download", "1MiB", t.TempDir())
	if code != 0 {
		t.Errorf("exit %d: %s", code, stderr)
	}
}

// The bounds are in the help texts: lectern help names them, lectern sync
// -h gives each flag with its default.
func TestBoundsInHelp(t *testing.T) {
	var out, errb bytes.Buffer
	run(context.Background(), []string{"help"}, func(string) string { return "" }, &out, &errb)
	run(context.Background(), []string{"sync", "-h"}, func(string) string { return "" }, &out, &errb)
	help := out.String() + errb.String()
	for _, want := range []string{"-timeout duration", "(default 1h0m0s)", "-connect-timeout duration", "(default 10s)",
		"-header-timeout duration", "-idle-timeout duration", "-max-download bytes", "(default 2 GiB)", "16 MiB",
		"LECTERN_URL's scheme, host and port", "https only"} {
		if !strings.Contains(help, want) {
			t.Errorf("the help texts do not say %q", want)
		}
	}
}
