package server

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/lectern-api/lectern/internal/httpsig"
	"github.com/lectern-api/lectern/shared/edgesig"
)

// logSink is a server log read by a test.
type logSink struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logSink) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// refused reports whether the log says the signature of request id was
// refused, and why.
func (l *logSink) refused(id string) (bool, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range strings.Split(l.b.String(), "\n") {
		if strings.Contains(line, "edge: signature refused") && strings.Contains(line, "requestId="+id+" ") {
			return true, line
		}
	}
	return false, ""
}

func sigHarness(t *testing.T, acceptV2 bool) (*harness, *logSink) {
	log := &logSink{}
	h := newHarnessOpts(t, smallContent(t, "2026-01-01"), harnessOptions{acceptV2: acceptV2,
		logger: slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	return h, log
}

// edgeRequest is a request of the edge, signed for purpose as the edge
// signs it (every field of edgesig.Signed, some present), not yet sent.
func edgeRequest(h *harness, purpose, tok, tag string) *http.Request {
	id := fmt.Sprintf("edge-sig-%06d", edgeCalls.Add(1))
	var req *http.Request
	if purpose == edgesig.Gate {
		req, _ = http.NewRequest("POST", h.api+edgesig.GatePath, nil)
		req.Header.Set(edgesig.TargetHeader, "/v1/tiers")
	} else {
		req, _ = http.NewRequest("GET", h.api+"/v1/tiers", nil)
		req.Header.Set("Accept-Encoding", "identity")
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("If-None-Match", tag)
	req.Header.Set("X-Request-Id", id)
	httpsig.Sign(testEdgeKeys, purpose, req, nil, h.now())
	return req
}

// TestSignedFieldAltered (#36, point 4): over a real listener, a forward
// and a gate call altered after signing in any field of their purpose's
// list (edgesig.Signed: a new field is tested with no change here) are
// refused: the gate answers 404, the forward is served as a direct
// request (no X-Lectern-Org), and the origin logs the refusal. Each field
// is altered three ways: another value, a second line, removed (or, for
// an absent one, added).
func TestSignedFieldAltered(t *testing.T) {
	h, log := sigHarness(t, false)
	tok := h.org("acme", "topics")
	tag := h.get("/v1/tiers", tok).header.Get("ETag")
	for _, purpose := range []string{edgesig.Forward, edgesig.Gate} {
		req := edgeRequest(h, purpose, tok, tag)
		r := h.send(req)
		if ok, line := log.refused(req.Header.Get("X-Request-Id")); ok || r.header.Get(edgesig.OrgHeader) != "acme" {
			t.Fatalf("%s as signed: %d, refused: %s", purpose, r.status, line)
		}
		for _, name := range edgesig.Signed(purpose) {
			for _, how := range []string{"another value", "a second line", "removed or added"} {
				req := edgeRequest(h, purpose, tok, tag)
				id := req.Header.Get("X-Request-Id")
				v := req.Header.Values(name)
				switch {
				case how == "another value" && len(v) > 0:
					req.Header.Set(name, v[0]+"x")
				case how == "another value":
					req.Header.Set(name, "x")
				case how == "a second line":
					req.Header.Add(name, "x")
				case len(v) > 0:
					req.Header.Del(name)
				default:
					req.Header.Set(name, "bytes=0-1")
				}
				r := h.send(req)
				refused := false
				if name == "x-request-id" { // the log names the origin's id, not the signed one
					refused = r.header.Get(edgesig.OrgHeader) == "" && (purpose == edgesig.Forward || r.status == http.StatusNotFound)
				} else {
					refused, _ = log.refused(id)
				}
				if !refused {
					t.Errorf("%s with %s altered (%s): %d, org %q: not refused", purpose, name, how, r.status, r.header.Get(edgesig.OrgHeader))
				}
				if purpose == edgesig.Gate && r.status != http.StatusNotFound {
					t.Errorf("gate with %s altered (%s): %d, want 404", name, how, r.status)
				}
				if purpose == edgesig.Forward && r.header.Get(edgesig.OrgHeader) != "" {
					t.Errorf("forward with %s altered (%s): answered as the edge's", name, how)
				}
			}
		}
	}
}

// TestHeldGateCallAnotherINM (#36, point 4): someone between edge and
// origin holds a gate call whose If-None-Match matches (a 304, one call)
// and sends it with another: refused (404), nothing billed. Sent as
// signed, late, it is the 204 it was and bills one call. Before the fix
// the altered call was accepted (412: the edge would forward, a full
// read); it still is from a previous release's edge while
// EdgeAcceptV2 is on, and refused when it is off.
func TestHeldGateCallAnotherINM(t *testing.T) {
	h, _ := sigHarness(t, false)
	tok := h.org("acme", "topics")
	tag := h.get("/v1/tiers", tok).header.Get("ETag")
	held := edgeRequest(h, edgesig.Gate, tok, tag)
	before := h.calls("acme")
	altered := held.Clone(held.Context())
	altered.Header.Set("If-None-Match", `W/"another"`)
	if r := h.send(altered); r.status != http.StatusNotFound {
		t.Errorf("the held gate call with another If-None-Match: %d, want 404", r.status)
	}
	if got := h.calls("acme"); got != before {
		t.Errorf("billed %d calls for the refused call", got-before)
	}
	if r := h.send(held); r.status != http.StatusNoContent {
		t.Errorf("the held gate call as signed: %d, want 204", r.status)
	}
	if got := h.calls("acme"); got != before+1 {
		t.Errorf("billed %d calls for the gated 304, want 1", got-before)
	}

	// The previous release's rule: refused unless the window is open.
	for _, acceptV2 := range []bool{false, true} {
		h, _ := sigHarness(t, acceptV2)
		tok := h.org("acme", "topics")
		tag := h.get("/v1/tiers", tok).header.Get("ETag")
		req := edgeRequest(h, edgesig.Gate, tok, tag)
		m := httpsig.Message(edgesig.Gate, req, "")
		s := edgesig.NewSigner(testEdgeKeys, 9)
		s.V2 = true
		req.Header.Set(edgesig.Header, s.Sign(&m, h.now().UnixMilli()))
		want := http.StatusNotFound
		if acceptV2 {
			want = http.StatusNoContent
		}
		if r := h.send(req); r.status != want {
			t.Errorf("a v2 gate call, EdgeAcceptV2 %v: %d, want %d", acceptV2, r.status, want)
		}
	}
}
