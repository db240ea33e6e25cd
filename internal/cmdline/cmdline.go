// Package cmdline is what Lectern's commands share on their command line
// (README, Environment): settings read from an environment
// variable with a flag mirroring it, switches that are booleans, -h that
// prints the flags and exits 0, and -version.
package cmdline

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/lectern-api/lectern/internal/version"
)

// FlagSet is a command's flags.
type FlagSet struct {
	*flag.FlagSet
	getenv  func(string) string
	version bool
	bad     error // an environment variable a switch cannot read
}

// New returns the flags of command name, with -version; getenv reads
// the environment variables that Env and Switch mirror.
func New(name string, getenv func(string) string) *FlagSet {
	fs := &FlagSet{FlagSet: flag.NewFlagSet(name, flag.ContinueOnError), getenv: getenv}
	fs.SetOutput(io.Discard) // Parse prints the usage when it is asked for
	fs.BoolVar(&fs.version, "version", false, "print the version and exit")
	return fs
}

// Env defines a string setting: environment variable env, mirrored by
// the flag name, whose default is env's value when set, else def.
func (fs *FlagSet) Env(dst *string, env, name, def, usage string) {
	if v := fs.getenv(env); v != "" {
		def = v
	}
	fs.StringVar(dst, name, def, usage+" ($"+env+")")
}

// Switch defines a boolean setting: environment variable env, read as
// strconv.ParseBool reads it ("1", "true", "0", ...), mirrored by the
// flag name.
func (fs *FlagSet) Switch(dst *bool, env, name, usage string) {
	def := false
	if v := fs.getenv(env); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil && fs.bad == nil {
			fs.bad = fmt.Errorf("%s=%q: want 1 or 0 (true or false)", env, v)
		}
		def = b
	}
	fs.BoolVar(dst, name, def, usage+" ($"+env+"=1)")
}

// OnOff defines a setting that is on or off: environment variable env,
// "on" or "off", mirrored by the flag name (-name=off), def when env is
// unset. Any other value stops Parse with a message naming env.
func (fs *FlagSet) OnOff(dst *bool, env, name string, def bool, usage string) {
	*dst = def
	if v := fs.getenv(env); v != "" {
		b, ok := parseOnOff(v)
		if !ok && fs.bad == nil {
			fs.bad = fmt.Errorf("%s=%q: want on or off", env, v)
		}
		*dst = b
	}
	fs.Func(name, usage+", on or off (default "+onOffText(def)+"; $"+env+")", func(v string) error {
		b, ok := parseOnOff(v)
		if !ok {
			return errors.New("want on or off")
		}
		*dst = b
		return nil
	})
}

func parseOnOff(v string) (on, ok bool) {
	switch v {
	case "on":
		return true, true
	case "off":
		return false, true
	}
	return false, false
}

func onOffText(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// ErrDone is Parse's answer when it has answered -h or -version itself:
// the command has nothing more to do, and exits 0.
var ErrDone = errors.New("done")

// Parse parses args, refusing positional arguments. It answers -h (the
// flags, on out) and -version (on out) with ErrDone.
func (fs *FlagSet) Parse(args []string, out io.Writer) error {
	err := fs.FlagSet.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(out)
		fmt.Fprintf(out, "usage of %s:\n", fs.Name())
		fs.PrintDefaults()
		return ErrDone
	case err != nil:
		return fmt.Errorf("%w (-h lists the flags)", err)
	case fs.version:
		fmt.Fprintln(out, Version(fs.Name()))
		return ErrDone
	case fs.bad != nil:
		return fs.bad
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected arguments %q (-h lists the flags)", fs.Args())
	}
	return nil
}

// Version describes the running binary for -version: the command, the
// release, the commit it was built from (with "+modified" for a dirty
// tree) and the Go version, as internal/version writes them, e.g.
// "origin 0.5.0 (commit 1a2b3c4d5e6f, go1.26.0)".
func Version(name string) string {
	return version.Read().String(name)
}

// Main runs a command: run with the process's arguments, environment and
// stdout, under a context that SIGINT and SIGTERM cancel. An error other
// than ErrDone is printed as "name: err" and exits 1.
func Main(name string, run func(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout)
	stop()
	if err != nil && !errors.Is(err, ErrDone) {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}
