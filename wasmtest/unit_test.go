package wasmtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"

	"github.com/lectern-api/lectern/internal/buildcache"
	"github.com/lectern-api/lectern/worker/wasmbuild"
)

// TestPipelineUnderTinyGo runs worker/pipeline's own tests compiled by
// TinyGo, as a WASI program under wazero: the module's logic under the
// toolchain it ships with, where unsafe string views, the reuse of ended
// requests and the allocation counts could differ from the native run.
func TestPipelineUnderTinyGo(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no TinyGo build (make test runs it)")
	}
	if tinygo == "" {
		t.Skip(noTinyGo + ": worker/pipeline's tests ran natively only; tools/tinygo/build.sh installs it")
	}
	bin := filepath.Join(t.TempDir(), "pipeline.test.wasm")
	// Kept by the hash of its sources (internal/buildcache): TinyGo takes
	// a minute and a half of CPU to build it.
	_, err := buildcache.Run(buildcache.Build{Dir: root, Out: bin, Packages: []string{"./worker/pipeline"}, Test: true, ListEnv: wasmbuild.GoEnv,
		Command: []string{tinygo, "test", "-c", "-target=wasip1", "-opt=2", "-o", bin, "./worker/pipeline"}})
	if err != nil {
		t.Fatal(err)
	}
	wasm, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, r)
	var out bytes.Buffer
	cfg := wazero.NewModuleConfig().WithArgs("pipeline.test", "-test.v").WithStdout(&out).WithStderr(&out).
		WithSysWalltime().WithSysNanotime().WithRandSource(rand.Reader)
	_, err = r.InstantiateWithConfig(ctx, wasm, cfg)
	if exit := (*sys.ExitError)(nil); errors.As(err, &exit) && exit.ExitCode() == 0 {
		err = nil
	}
	if err != nil {
		t.Fatalf("worker/pipeline's tests under TinyGo: %v\n%s", err, out.Bytes())
	}
	passed := regexp.MustCompile(`(?m)^--- PASS: `).FindAll(out.Bytes(), -1)
	if len(passed) < 20 || !bytes.Contains(out.Bytes(), []byte("--- PASS: TestGate304Allocations")) ||
		!bytes.Contains(out.Bytes(), []byte("--- PASS: TestLease304Allocations")) || !bytes.Contains(out.Bytes(), []byte("--- PASS: TestLeaseChurn")) {
		t.Fatalf("worker/pipeline's tests under TinyGo: %d passed, TestGate304Allocations, TestLease304Allocations or TestLeaseChurn not among them:\n%s", len(passed), out.Bytes())
	}
	t.Logf("worker/pipeline under TinyGo: %d tests passed", len(passed))
}
