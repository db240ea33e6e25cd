package wazero

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/lectern-api/lectern/shared/edgesig"
	"github.com/lectern-api/lectern/shared/lease"
	"github.com/lectern-api/lectern/worker/wazero/wazerotest"
)

var module struct {
	once sync.Once
	mod  *Module
	err  error
}

// testModule compiles a standard Go build of the module, once.
func testModule(t *testing.T) *Module {
	t.Helper()
	wasm := wazerotest.GoModule(t)
	module.once.Do(func() { module.mod, module.err = Compile(context.Background(), wasm) })
	if module.err != nil {
		t.Fatal(module.err)
	}
	return module.mod
}

// leasedHost serves the module with leases on (unless adjust turns them
// off) in front of origin, on a real listener, and returns its base URL.
func leasedHost(t *testing.T, origin string, adjust func(*Config)) (*Host, string) {
	t.Helper()
	mod := testModule(t)
	srv := wazerotest.Listen(t, nil)
	cfg := Config{Origin: origin, JWKSURL: origin + "/.well-known/jwks.json", Issuer: origin, Audience: "lectern-api",
		Secret: testSecret, ResourceMetadata: srv.URL + "/.well-known/oauth-protected-resource", Instances: 2,
		Leases: true, Revoke: srv.URL + lease.RevokePath, UsageLog: filepath.Join(t.TempDir(), "usage.log")}
	if adjust != nil {
		adjust(&cfg)
	}
	h, err := New(context.Background(), mod, cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv.Serve(t, h, nil)
	return h, srv.URL
}

// revoke posts body to base's revoke endpoint signed with keys (none when
// nil) for purpose, POST and body.
func revoke(t *testing.T, base, method, purpose string, keys *edgesig.Keys, now time.Time, body string) (int, string, string) {
	t.Helper()
	sig := ""
	if keys != nil {
		sig = revokeSig(*keys, purpose, base, body, now)
	}
	return postRevoke(t, base, method, sig, body)
}

const revokeID = "req_revoke_test_0001"

// revokeSig signs a revoke push of body to base for purpose.
func revokeSig(keys edgesig.Keys, purpose, base, body string, now time.Time) string {
	return edgesig.NewSigner(keys, uint64(now.UnixNano())).Sign(&edgesig.Message{Purpose: purpose, Method: "POST",
		Host: strings.TrimPrefix(base, "http://"), Target: lease.RevokePath, Body: edgesig.BodyHash([]byte(body)), RequestID: revokeID}, now.UnixMilli())
}

// postRevoke posts body to base's revoke endpoint with signature sig.
func postRevoke(t *testing.T, base, method, sig, body string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest(method, base+lease.RevokePath, strings.NewReader(body))
	if sig != "" {
		req.Header.Set(edgesig.Header, sig)
	}
	req.Header.Set("X-Request-Id", revokeID)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e struct{ Error struct{ Code string } }
	json.Unmarshal(b, &e)
	return resp.StatusCode, e.Error.Code, string(b)
}

// TestRevokeAcceptedSecret (#34, point 3): while LECTERN_SECRET is
// rotated, the host takes revoke pushes signed with the secret or the
// one accepted beside it (origins not yet restarted sign with it).
func TestRevokeAcceptedSecret(t *testing.T) {
	const accepted = "the-accepted-secret-of-the-rotation-0123"
	_, base := leasedHost(t, "http://127.0.0.1:1", func(c *Config) { c.SecretAccept = accepted })
	good := `{"leases":["L1"],"keep":false}`
	for name, keys := range map[string]edgesig.Keys{
		"the secret": edgesig.KeysOf([]byte(testSecret)), "the accepted secret": edgesig.KeysOf([]byte(accepted)),
	} {
		if status, code, body := revoke(t, base, "POST", edgesig.Revoke, &keys, time.Now(), good); status != 200 {
			t.Errorf("a push signed with %s: %d %s\n%s", name, status, code, body)
		}
	}
	other := edgesig.KeysOf([]byte("another-secret-of-at-least-32-characters"))
	if status, code, _ := revoke(t, base, "POST", edgesig.Revoke, &other, time.Now(), good); status != 404 {
		t.Errorf("a push signed with a third secret: %d %s", status, code)
	}
}

// TestRevokeEndpoint: only the origin's signature (the edge key, purpose
// Revoke, POST to the endpoint) reaches it, and everything else is the
// module's 404 as for any path outside /v1; a body that is not a revoke
// message is 400; a good one is answered with the reports of the leases
// held (none here).
func TestRevokeEndpoint(t *testing.T) {
	_, base := leasedHost(t, "http://127.0.0.1:1", nil)
	key := edgesig.KeysOf([]byte(testSecret))
	other := edgesig.KeysOf([]byte("another-secret-of-at-least-32-characters"))
	good := `{"leases":["L1","L2"],"keep":false}`
	for _, tc := range []struct {
		name, method, purpose string
		key                   *edgesig.Keys
		body                  string
		status                int
		code                  string
	}{
		{"unsigned", "POST", edgesig.Revoke, nil, good, 404, "NOT_FOUND"},
		{"another key", "POST", edgesig.Revoke, &other, good, 404, "NOT_FOUND"},
		{"another purpose", "POST", edgesig.Gate, &key, good, 404, "NOT_FOUND"},
		{"another method", "PUT", edgesig.Revoke, &key, good, 404, "NOT_FOUND"},
		{"not JSON", "POST", edgesig.Revoke, &key, `{"leases":`, 400, "BAD_REQUEST"},
		{"not lease ids", "POST", edgesig.Revoke, &key, `{"leases":["a b"]}`, 400, "BAD_REQUEST"},
		{"no leases", "POST", edgesig.Revoke, &key, `{"keep":true}`, 400, "BAD_REQUEST"},
		// Over lease.MaxBody: not read whole, so not what was signed.
		{"too large", "POST", edgesig.Revoke, &key, `{"leases":["L1"],"keep":false` + strings.Repeat(" ", lease.MaxBody) + `}`, 404, "NOT_FOUND"},
		{"good", "POST", edgesig.Revoke, &key, good, 200, ""},
		{"keep", "POST", edgesig.Revoke, &key, `{"leases":["L1"],"keep":true}`, 200, ""},
	} {
		status, code, body := revoke(t, base, tc.method, tc.purpose, tc.key, time.Now(), tc.body)
		if status != tc.status || code != tc.code {
			t.Errorf("%s: %d %s, want %d %s\n%s", tc.name, status, code, tc.status, tc.code, body)
		}
		if status == 200 {
			if rs, err := lease.ParseReports([]byte(body)); err != nil || len(rs) != 0 {
				t.Errorf("%s: answered %q (%v), want no reports", tc.name, body, err)
			}
		}
	}

	if status, code, _ := revoke(t, base, "POST", edgesig.Revoke, &key, time.Now().Add(-(edgesig.Window+1000)*time.Millisecond), good); status != 404 || code != "NOT_FOUND" {
		t.Errorf("a stale signature: %d %s, want 404 NOT_FOUND", status, code)
	}

	// A signature is taken once, for its body, by the host it names.
	sig := revokeSig(key, edgesig.Revoke, base, good, time.Now())
	if status, code, body := postRevoke(t, base, "POST", sig, `{"leases":["L3"],"keep":false}`); status != 404 || code != "NOT_FOUND" {
		t.Errorf("another body: %d %s %s", status, code, body)
	}
	if status, _, body := postRevoke(t, base, "POST", sig, good); status != 200 {
		t.Errorf("the signed push: %d %s", status, body)
	}
	if status, code, body := postRevoke(t, base, "POST", sig, good); status != 404 || code != "NOT_FOUND" {
		t.Errorf("the same push replayed: %d %s %s", status, code, body)
	}
	_, peer := leasedHost(t, "http://127.0.0.1:1", nil)
	if status, code, body := postRevoke(t, peer, "POST", revokeSig(key, edgesig.Revoke, base, good, time.Now()), good); status != 404 || code != "NOT_FOUND" {
		t.Errorf("a push for one edge host sent to another: %d %s %s", status, code, body)
	}

	// Without leases the host has no revoke endpoint.
	_, base = leasedHost(t, "http://127.0.0.1:1", func(c *Config) { c.Leases, c.Revoke = false, "" })
	if status, code, body := revoke(t, base, "POST", edgesig.Revoke, &key, time.Now(), good); status != 404 || code != "NOT_FOUND" {
		t.Errorf("leases off: %d %s\n%s", status, code, body)
	}
}

// TestLeasesNeedAUsageLog: leases without a usage log do not start.
func TestLeasesNeedAUsageLog(t *testing.T) {
	_, err := New(context.Background(), testModule(t), Config{Origin: "http://127.0.0.1:1", Secret: testSecret, Leases: true})
	if err == nil || !strings.Contains(err.Error(), "usage log") {
		t.Errorf("New: %v", err)
	}
}

// TestFlushWithoutUsage: a flush with nothing to report sends nothing.
func TestFlushWithoutUsage(t *testing.T) {
	o := &usageOrigin{t: t}
	srv := httptest.NewServer(o)
	defer srv.Close()
	h, _ := leasedHost(t, srv.URL, nil)
	if err := h.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if o.n != 0 {
		t.Errorf("%d usage reports without usage", o.n)
	}
}

// TestStartReplays: a host started on the log of a run that was killed
// reports its records to the origin as final.
func TestStartReplays(t *testing.T) {
	o := &usageOrigin{t: t}
	srv := httptest.NewServer(o)
	defer srv.Close()
	log := filepath.Join(t.TempDir(), "usage.log")
	os.WriteFile(log, []byte("L1 4\nL2 2\nL1 5\nL2 3"), 0o600) // L2's last record torn
	leasedHost(t, srv.URL, func(c *Config) { c.UsageLog = log })
	for { // the replay runs in the background; the file goes once it is answered
		if _, err := os.Stat(replayPath(log)); os.IsNotExist(err) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	want := []lease.Report{{Lease: "L1", Used: 5, Final: true}, {Lease: "L2", Used: 2, Final: true}}
	if diff := cmp.Diff(want, o.got); diff != "" {
		t.Errorf("the origin's usage reports (-want +got):\n%s", diff)
	}
}

// TestRevokeAnswersTheReplay: while an earlier run's usage is still on
// its way to the origin (the origin refuses it here), a revoke push that
// names one of its leases is answered with that usage, final, so the
// origin does not close the lease below what was served; a lease neither
// held nor replayed is left out.
func TestRevokeAnswersTheReplay(t *testing.T) {
	o := &usageOrigin{t: t, fail: 1 << 20}
	srv := httptest.NewServer(o)
	defer srv.Close()
	log := filepath.Join(t.TempDir(), "usage.log")
	os.WriteFile(log, []byte("L1 4\nL1 5\n"), 0o600)
	_, base := leasedHost(t, srv.URL, func(c *Config) { c.UsageLog = log })
	key := edgesig.KeysOf([]byte(testSecret))
	status, code, body := revoke(t, base, "POST", edgesig.Revoke, &key, time.Now(), `{"leases":["L1","L3"],"keep":false}`)
	if status != 200 {
		t.Fatalf("revoke: %d %s\n%s", status, code, body)
	}
	rs, err := lease.ParseReports([]byte(body))
	if err != nil {
		t.Fatalf("revoke answered %q: %v", body, err)
	}
	want := []lease.Report{{Lease: "L1", Used: 5, Final: true}}
	if diff := cmp.Diff(want, rs); diff != "" {
		t.Errorf("revoke's reports (-want +got):\n%s", diff)
	}
}
