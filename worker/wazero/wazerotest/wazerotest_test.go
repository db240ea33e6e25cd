package wazerotest

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lectern-api/lectern/shared/edgesig"
	"github.com/lectern-api/lectern/shared/lease"
)

// TestSubrequests: every subrequest is counted by its kind, a lease
// answer is shown to Answered and held until released, and the host
// reads it whole.
func TestSubrequests(t *testing.T) {
	answer := lease.Answer{Lease: "L1", Org: "acme", Epoch: 1, ContentVersion: "v1", Grants: "00ff", Calls: 10, ValidMs: 5000}
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == lease.Path {
			w.Write(lease.AppendAnswer(nil, &answer))
		}
	}))
	defer origin.Close()
	s := NewSubrequests()
	var answered []lease.Answer
	s.Answered = func(a lease.Answer) { answered = append(answered, a) }
	c := s.Client()
	get := func(path string) string {
		t.Helper()
		resp, err := c.Get(origin.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	for _, path := range []string{edgesig.GatePath, edgesig.GatePath, lease.UsagePath, "/v1/tiers"} {
		get(path)
	}
	h := s.HoldNext()
	body := make(chan string)
	go func() { body <- get(lease.Path) }()
	<-h.Held
	select {
	case <-body:
		t.Fatal("a held lease answer reached the host")
	default:
	}
	close(h.Release)
	if got, want := <-body, string(lease.AppendAnswer(nil, &answer)); got != want {
		t.Errorf("the host read %q, want %q", got, want)
	}

	type counts struct{ Gates, Leases, Usages, Others int64 }
	got := counts{s.Gates.Load(), s.Leases.Load(), s.Usages.Load(), s.Others.Load()}
	if diff := cmp.Diff(counts{Gates: 2, Leases: 1, Usages: 1, Others: 1}, got); diff != "" {
		t.Errorf("subrequests (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]lease.Answer{answer}, answered); diff != "" {
		t.Errorf("lease answers (-want +got):\n%s", diff)
	}
}

// fakeHost is a Host that says whether it was closed.
type fakeHost struct {
	http.HandlerFunc
	closed bool
}

func (h *fakeHost) Close(context.Context) error { h.closed = true; return nil }

// TestServe: a Server's URL is known before it serves; it serves the
// host, through a handler when given one, and closes the host at the
// test's end.
func TestServe(t *testing.T) {
	h := &fakeHost{HandlerFunc: func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "host") }}
	t.Run("serve", func(t *testing.T) {
		srv := Listen(t, nil)
		srv.Serve(t, h, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "wrapped ")
			h.ServeHTTP(w, r)
		}))
		resp, err := http.Get(srv.URL + "/")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "wrapped host" {
			t.Errorf("served %q, want %q", b, "wrapped host")
		}
	})
	if !h.closed {
		t.Error("the host was not closed when its test ended")
	}
}
