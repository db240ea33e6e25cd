package main

import (
	"strings"
	"testing"

	"github.com/lectern-api/lectern/origin/lease"
)

// edgeURLs lists the edge the stack starts as the edge names itself in
// its revoke URL, in a form LECTERN_EDGE_URLS accepts, so that the
// origin takes the edge's lease requests and pushes to it.
func TestEdgeURLs(t *testing.T) {
	for _, c := range []struct {
		addr, revoke string
		want         []string // entries the list must hold
	}{
		{"127.0.0.1:8787", "", []string{"http://127.0.0.1:8787"}},
		{"[::1]:8787", "", []string{"http://[::1]:8787"}},
		{"0.0.0.0:8787", "", []string{"http://0.0.0.0:8787", "http://[::]:8787"}},
		{":8787", "", []string{"http://0.0.0.0:8787", "http://[::]:8787"}},
		{"localhost:8787", "", []string{"http://localhost:8787", "http://127.0.0.1:8787"}},
		{"0.0.0.0:8787", "https://edge.example/internal/revoke", []string{"https://edge.example"}},
	} {
		env := map[string]string{"LECTERN_EDGE_REVOKE_URL": c.revoke}
		got := edgeURLs(func(k string) string { return env[k] }, c.addr)
		edges, err := lease.ParseEdges(got)
		if err != nil {
			t.Errorf("%s %q: %q is no LECTERN_EDGE_URLS: %v", c.addr, c.revoke, got, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(","+strings.Join(edges, ",")+",", ","+w+",") {
				t.Errorf("%s %q: %q lacks %s", c.addr, c.revoke, got, w)
			}
		}
	}
	for _, u := range []string{"https://proxy.example/edge-1/revoke", "https://proxy.example/edge-1/internal/revoke"} {
		env := map[string]string{"LECTERN_EDGE_REVOKE_URL": u}
		if got := edgeURLs(func(k string) string { return env[k] }, "127.0.0.1:8787"); got != "" {
			t.Errorf("%s, a revoke URL no listed edge can have: %q, want none", u, got)
		}
	}
}
