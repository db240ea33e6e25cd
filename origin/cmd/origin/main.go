// Command origin runs Lectern's origin stack in the foreground: the public
// API (direct mode), the dev identity provider and the admin API, on the
// addresses of the README's settings; either of the last two may
// be off. `make run` starts it. Several origins share one PostgreSQL
// database, LECTERN_SECRET and LECTERN_ISSUER (config.check).
package main

import (
	"context"
	"io"

	"github.com/lectern-api/lectern/internal/cmdline"
)

func main() { cmdline.Main("origin", run) }

// run starts the stack and serves until ctx is done.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	cfg, err := parseCommandLine(args, getenv, stdout)
	if err != nil {
		return err
	}
	st, err := start(ctx, cfg, stdout)
	if err != nil {
		return err
	}
	<-ctx.Done()
	return st.Close()
}
