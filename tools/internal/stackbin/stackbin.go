// Package stackbin builds the local stack's commands (origin, edge, stack,
// adminctl) and the edge module into a directory, and finds free loopback
// addresses for their listeners: for the tools and tests that run the
// stack as an operator does, from the built binaries (tools/stack's tests,
// tools/soak).
package stackbin

import (
	"fmt"
	"net"
	"os/exec"
	"path/filepath"

	"github.com/lectern-api/lectern/worker/wasmbuild"
)

// Commands are the import paths Build builds, each into dir under its last
// element's name.
var Commands = []string{
	"github.com/lectern-api/lectern/origin/cmd/origin", "github.com/lectern-api/lectern/worker/cmd/edge",
	"github.com/lectern-api/lectern/tools/stack", "github.com/lectern-api/lectern/tools/adminctl",
}

// Module is the file name of the edge module in Build's directory.
const Module = "worker.wasm"

// Build builds Commands and the edge module (Module) into dir: the module
// with the TinyGo at tinygo (the deployed build, wasmbuild.TinyGoBuild) when
// tinygo is not empty, else with standard Go (wasmbuild.GoBuild); a build of
// unchanged sources is copied (wasmbuild.BuildModule).
func Build(dir, tinygo string) error {
	cmd := exec.Command("go", append([]string{"build", "-o", dir + string(filepath.Separator)}, Commands...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build the commands: %v\n%s", err, out)
	}
	if err := wasmbuild.BuildModule(".", tinygo, filepath.Join(dir, Module), "github.com/lectern-api/lectern/worker/wasm"); err != nil {
		return fmt.Errorf("build the module: %v", err)
	}
	return nil
}

// FreeAddr is a loopback address nothing listens on. The stack's children
// need fixed addresses, since a restarted child must come back on its own.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
