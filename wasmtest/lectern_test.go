package wasmtest

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestLecternSyncThroughEdge (issue #26): the first-party client, as a
// user runs it, against the edge: it finds the token endpoint from the
// edge's 401 challenge, mirrors every granted subject from exports, and a
// second run with nothing changed bills nothing (the origin's meters say
// so, not the client).
func TestLecternSyncThroughEdge(t *testing.T) {
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	bin := filepath.Join(t.TempDir(), "lectern")
	if err := run(root, nil, "go", "build", "-o", bin, "./tools/lectern"); err != nil {
		t.Fatal(err)
	}
	o := shared(t)
	forDeployedBuild(t, func(t *testing.T, b *build) {
		e := newEdge(t, b, o, nil)
		org := "lectern-" + b.name
		id, sec := o.org(t, `{"orgId":"`+org+`","contentGrants":["high"]}`, "content.read", "content.export")
		dir := t.TempDir()
		syncOnce := func() map[string]any {
			t.Helper()
			cmd := exec.Command(bin, "sync", "-json", dir)
			cmd.Env = append(os.Environ(), "LECTERN_URL="+e.url, "LECTERN_CLIENT_ID="+id, "LECTERN_CLIENT_SECRET="+sec)
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Run(); err != nil {
				t.Fatalf("lectern sync: %v: %s", err, errb.Bytes())
			}
			var sum map[string]any
			if err := json.Unmarshal(out.Bytes(), &sum); err != nil {
				t.Fatalf("summary %s: %v", out.Bytes(), err)
			}
			return sum
		}
		var high []string
		for _, s := range content.Subjects {
			if s.Tier == "high" {
				high = append(high, s.Ref())
			}
		}
		first := syncOnce()
		if first["complete"] != true || first["subjects"].(map[string]any)["held"] != float64(len(high)) {
			t.Fatalf("first run: %v", first)
		}
		for _, ref := range high {
			if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(ref), "manifest.json")); err != nil {
				t.Errorf("%s: %v", ref, err)
			}
		}
		calls := o.calls(t, org)
		second := syncOnce()
		if second["complete"] != true || second["subjects"].(map[string]any)["fetched"] != float64(0) {
			t.Fatalf("second run: %v", second)
		}
		if after := o.calls(t, org); after != calls {
			t.Errorf("a second run with nothing changed billed %d calls", after-calls)
		}
	})
}
