package wasmtest

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/lectern-api/lectern/shared/route"
	"github.com/lectern-api/lectern/shared/vectorstest"
)

// TestQueryVectors runs the error lines of shared/param/testdata/query.txt
// (the file that holds shared/param to its answers) through the edge: each
// is answered 400 by the edge itself, with exactly the vector's body, and
// nothing reaches the origin.
func TestQueryVectors(t *testing.T) {
	forEachBuild(t, func(t *testing.T, b *build) {
		o := shared(t)
		f := newFixture(t, o, "vec-"+b.name)
		e := newEdge(t, b, o, nil)
		sub := content.Subjects[0]
		vars := strings.NewReplacer("{tier}", sub.Tier, "{subjectSlug}", sub.Slug, "{classNum}", "1", "{test}", content.Tests[0].ID)
		ran := 0
		for _, v := range vectorstest.Read(t, filepath.Join(root, "shared/param/testdata/query.txt"), 2) {
			in, want := v.Fields[0], v.Fields[1]
			if strings.HasPrefix(want, "ok ") || want == "ok" {
				continue
			}
			idText, query, _ := strings.Cut(in, " ")
			id, _ := strconv.Atoi(idText)
			r := route.ByID(route.ID(id))
			if r == nil || r.Learner { // learner routes answer 403 LEARNER_REQUIRED to a machine token first
				continue
			}
			target := vars.Replace(r.Pattern)
			if query != "-" {
				target += "?" + query
			}
			reqID := fmt.Sprintf("vec-%s-%03d-query", b.name, v.Line)
			before := e.host.Stats()
			got := do(t, e.url, r.Method, target, "", "Authorization", "Bearer "+f.tokens["full"], "X-Request-Id", reqID)
			body := strings.Replace(string(got.body), `,"requestId":"`+reqID+`"`, "", 1)
			if got.status != 400 || body != want {
				t.Errorf("line %d: %s %s:\n got %d %s\nwant 400 %s", v.Line, r.Method, target, got.status, got.body, want)
			}
			if after := e.host.Stats(); after.Forwards != before.Forwards {
				t.Errorf("line %d: the edge forwarded a request it must refuse itself", v.Line)
			}
			ran++
		}
		if ran == 0 {
			t.Fatal("no vector ran")
		}
		t.Logf("%d vectors", ran)
	})
}
