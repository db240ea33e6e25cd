// Command gen writes the lectern command's API client,
// tools/lectern/api/client.gen.go: it builds the OpenAPI description an
// origin serves at GET /v1/openapi.json (origin/openapi, the same Build and
// Render the route runs) for the small generated corpus, and runs the
// pinned oapi-codegen (go.mod's tool directive) over it with
// tools/lectern/api/oapi-codegen.yaml. Regenerate with
//
//	go generate ./tools/lectern/api    (or: make client)
//
// The description depends on the corpus only through its enumerations
// (tiers, tests, sections, media types) and info.x-content-version. The
// small corpus (gen.Options{Seed: 1, Small: true}) holds every tier that
// shared/id allows and every test and section the generator writes, so
// the client's constants are a superset of a deployment's; the generated
// types are plain strings, and nothing in the client rejects a value
// outside them. TestClientUpToDate holds the committed file to this
// program's output.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/corpus/gen"
	"github.com/lectern-api/lectern/origin/openapi"
)

// Files of the client package.
const (
	configFile = "oapi-codegen.yaml"
	clientFile = "client.gen.go"
)

// regenerate is the command that brings client.gen.go up to date.
const regenerate = "go generate ./tools/lectern/api (or make client)"

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("gen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	apiDir := fs.String("api", ".", "the client package's `directory`: "+configFile+" is read and "+clientFile+" written there")
	if err := fs.Parse(args); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "lectern-gen-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	desc, err := description(tmp)
	if err != nil {
		return err
	}
	return generate(ctx, *apiDir, desc, filepath.Join(*apiDir, clientFile), tmp)
}

// descConf is the configuration part of the description (the identity
// provider's URLs, the licence URL). None of it reaches the generated
// code; it is fixed so that the description is.
var descConf = openapi.Conf{Issuer: "https://auth.lectern.example", LicenseURL: "https://lectern.example/licence"}

// description is the body of GET /v1/openapi.json from an origin serving
// the small generated corpus, which it writes under tmp.
func description(tmp string) ([]byte, error) {
	dir := filepath.Join(tmp, "corpus")
	if _, err := gen.Write(dir, gen.Options{Seed: 1, Small: true}); err != nil {
		return nil, fmt.Errorf("generate the corpus: %w", err)
	}
	c, err := corpus.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("load the corpus: %w", err)
	}
	d, err := openapi.Build(c).Render(descConf)
	if err != nil {
		return nil, fmt.Errorf("render the description: %w", err)
	}
	return d.Body, nil
}

// generate runs `go tool oapi-codegen` with apiDir's configuration over
// desc, writing the client to out; tmp holds the description's file.
// The go command runs in apiDir, inside the module, so the tool is the
// version go.mod pins, built from the module cache: GOPROXY=off keeps it
// from fetching anything (.ci/run's go mod download fills the cache).
func generate(ctx context.Context, apiDir string, desc []byte, out, tmp string) error {
	file := filepath.Join(tmp, "openapi.json")
	if err := os.WriteFile(file, desc, 0o644); err != nil {
		return err
	}
	cfg, err := filepath.Abs(filepath.Join(apiDir, configFile))
	if err != nil {
		return err
	}
	if out, err = filepath.Abs(out); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, goCommand(), "tool", "oapi-codegen", "-config", cfg, "-o", out, file)
	cmd.Dir = apiDir
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go tool oapi-codegen: %w\n%s", err, stderr.Bytes())
	}
	// oapi-codegen prints warnings and goes on: a warning is a change to
	// look at, so it stops the generator (and the test) here.
	if stderr.Len() > 0 {
		return errors.New("go tool oapi-codegen warned:\n" + stderr.String())
	}
	return nil
}

// goCommand is the go command that runs this program or its test (go
// run, go generate and go test put their GOROOT's bin first on PATH).
func goCommand() string {
	if root := os.Getenv("GOROOT"); root != "" {
		if p := filepath.Join(root, "bin", "go"); fileExists(p) {
			return p
		}
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
