package wasmtest

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestScratchLateReplay(t *testing.T) {
	forEachBuild(t, func(t *testing.T, b *build) {
		if b.name != "go" {
			t.Skip()
		}
		o := startLeaseOrigin(t)
		org := "lscr-" + b.name
		id, sec := o.org(t, `{"orgId":"`+org+`","contentGrants":`+allTiers+`,"quota":{"calls":100}}`, "content.read")
		tok := o.token(t, id, sec, "content.read")
		usageLog := filepath.Join(t.TempDir(), "usage.log")
		e := startEdgeProc(t, b, o, "127.0.0.1:0", usageLog)
		served := 0
		r := do(t, e.url, "GET", "/v1/tiers", "", "Authorization", "Bearer "+tok)
		tag := r.header.Get("ETag")
		served++
		for i := 0; i < 12; i++ {
			r := do(t, e.url, "GET", "/v1/tiers", "", "Authorization", "Bearer "+tok, "If-None-Match", tag)
			if r.status == 304 {
				served++
			}
			if i == 0 {
				waitFor(t, "x", func() bool { return true })
				for j := 0; j < 1e6; j++ {
				}
			}
		}
		e.cmd.Process.Signal(syscall.SIGKILL)
		e.cmd.Wait()
		logb, _ := os.ReadFile(usageLog)
		t.Logf("log: %q", logb)
		o.advance(t, 10)
		for {
			r := do(t, o.api, "GET", "/v1/tiers", "", "Authorization", "Bearer "+tok, "If-None-Match", tag)
			if r.status != 304 {
				t.Logf("direct: %d %s", r.status, r.code())
				break
			}
			served++
		}
		t.Logf("before replay: billed %d served %d", o.calls(t, org), served)
		e = startEdgeProc(t, b, o, e.addr, usageLog)
		waitFor(t, "replay", func() bool { _, err := os.Stat(usageLog + ".replay"); return os.IsNotExist(err) })
		t.Logf("after replay: billed %d served %d", o.calls(t, org), served)
	})
}
