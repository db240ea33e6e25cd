package main

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lectern-api/lectern/internal/httpsig"
	"github.com/lectern-api/lectern/shared/edgesig"
	"github.com/lectern-api/lectern/shared/lease"
)

// TestEdgeRevokeEndpoint: the edge serves the origin's revoke push on its
// own listener, through its access log and limits, checked with the edge
// key; its usage log is where it is configured, mode 0600. With leases
// off the path is the module's 404.
func TestEdgeRevokeEndpoint(t *testing.T) {
	log := filepath.Join(t.TempDir(), "var", "usage.log")
	base := startEdge(t, "http://127.0.0.1:1", func(c *config) { c.UsageLog = log })
	if fi, err := os.Stat(log); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("usage log %s: %v %v, want mode 0600", log, fi, err)
	}
	key := edgesig.KeysOf([]byte("a-test-secret-of-at-least-32-characters"))
	post := func(base string, key edgesig.Keys) (int, string) {
		const id = "req_edge_revoke_test"
		body := []byte(`{"leases":["L1"]}`)
		req, _ := http.NewRequest("POST", base+lease.RevokePath, bytes.NewReader(body))
		req.Header.Set("X-Request-Id", id)
		httpsig.Sign(key, edgesig.Revoke, req, body, time.Now())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if status, body := post(base, key); status != 200 || body != `{"reports":[]}` {
		t.Errorf("signed revoke: %d %s", status, body)
	}
	if status, body := post(base, edgesig.KeysOf([]byte("another-secret-of-at-least-32-characters"))); status != 404 || !strings.Contains(body, "NOT_FOUND") {
		t.Errorf("revoke signed with another key: %d %s", status, body)
	}
	off := startEdge(t, "http://127.0.0.1:1", func(c *config) { c.Leases = false })
	if status, body := post(off, key); status != 404 || !strings.Contains(body, "NOT_FOUND") {
		t.Errorf("leases off: %d %s", status, body)
	}
}
