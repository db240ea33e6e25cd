// Command lectern is the first-party client of the Lectern API: it
// mirrors an organisation's granted corpus into a directory at the least
// billed cost (docs/integrating.md).
//
//	lectern help
//	lectern -version
//	lectern sync [-tier T,…] [-subject tier/slug,…] [-prune] [-media] [-json] [-quiet] DIR
//
// It reads LECTERN_URL (the API's base URL, the edge in production),
// LECTERN_CLIENT_ID and LECTERN_CLIENT_SECRET, finds the token endpoint
// itself (the 401 challenge's resource metadata, RFC 9728, then the
// authorization server's metadata, RFC 8414) and keeps its token fresh.
//
// Exit status: 0 when the mirror is complete; 3 when it stopped cleanly
// short of complete (a quota spent, an hourly cap too far off), holding
// what it verified; 1 on any other failure; 2 on a usage error; 130 when
// SIGINT interrupted it (143: SIGTERM), the state left consistent.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/lectern-api/lectern/internal/cmdline"
)

// exitStopped is the exit status of a sync that stopped cleanly, short of
// complete.
const exitStopped = 3

const usage = `lectern: the Lectern API's first-party client

Usage:
  lectern help                 this text
  lectern -version             its release and commit (CHANGELOG.md)
  lectern sync [flags] DIR     mirror every granted subject into DIR (flags: lectern sync -h)
  lectern check [-json] DIR    verify DIR against its manifests, offline; exit 1 on a difference
  lectern sync -watch [-interval 60s] [-listen ADDR] DIR
                               keep DIR current: poll the free contentVersion, and with -listen take
                               signed content.changed webhooks (secret: LECTERN_WEBHOOK_SECRET)

Environment:
  LECTERN_URL            the API's base URL (the edge in production), e.g. https://api.example
  LECTERN_CLIENT_ID      the organisation's client id (client_credentials)
  LECTERN_CLIENT_SECRET  its secret

lectern sync takes whole subjects as zip exports (never lesson by lesson, which
trips the enumeration alarm), checks every file against the bundle's manifest,
and replaces a subject in DIR only whole. A second run with nothing changed
bills nothing. After a corpus rebuild it asks the free change feed what moved
and updates a changed subject from class exports when that spends less of the
quota left than a subject export. Exit status: 0 complete, 3 stopped short (a quota spent; what it
holds is kept and verified), 1 failure, 2 usage, 130 interrupted (Ctrl-C: the
step under way is abandoned or ends, DIR is left consistent; run it again).

Its token goes only to LECTERN_URL's scheme, host and port, its secret only to
the token endpoint it finds; it speaks https only (plain http to a loopback
host) and follows no redirect that leaves those. What a server can make it
wait for or write is bounded: -timeout (the whole run, 1h), -connect-timeout,
-header-timeout and -idle-timeout (seconds), -max-download (a download, 2GiB),
a JSON answer (16 MiB), and a bundle's files (the sizes its manifest lists).
`

func main() {
	ctx, stop := signalContext(context.Background()) // interrupt.go
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the command: its arguments, environment and outputs; it returns
// the exit status.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	case "-version", "--version", "version":
		fmt.Fprintln(stdout, cmdline.Version("lectern"))
		return 0
	case "check":
		return runCheck(args[1:], stdout, stderr)
	case "sync":
		return runSync(ctx, args[1:], getenv, stdout, stderr)
	}
	fmt.Fprintf(stderr, "lectern: unknown command %q\n\n%s", args[0], usage)
	return 2
}

// runSync parses sync's flags and runs it.
func runSync(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("lectern sync", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o syncOptions
	var tiers, subjects string
	fs.StringVar(&tiers, "tier", "", "update only these tiers, comma-separated (topics, college, high, middle, primary); the rest of DIR is kept")
	fs.StringVar(&subjects, "subject", "", "update only these subjects, comma-separated, as tier/slug; the rest of DIR is kept")
	fs.BoolVar(&o.Prune, "prune", false, "also remove from DIR the subjects -tier and -subject do not select (without it, only subjects no longer granted are removed)")
	fs.BoolVar(&o.Media, "media", false, "also mint and download every asset of the subjects (spends the download quota and the hourly mint cap)")
	fs.BoolVar(&o.JSON, "json", false, "end with a machine-readable summary on standard output")
	fs.BoolVar(&o.Quiet, "quiet", false, "no progress")
	fs.BoolVar(&o.DryRun, "dry-run", false, "say what a run would do with each subject (fetch, repair, unchanged, remove) and what it would bill, asking only the unmetered GET /v1/license: nothing changed, nothing billed")
	fs.DurationVar(&o.KeepPrevious, "keep-previous", 5*time.Minute, "keep a subject's previous copy this long after its link moves to the new one (or it leaves DIR), for readers that resolved the link before; a later run removes it (0: at once)")
	fs.BoolVar(&o.Verify, "verify", false, "rehash every file held before taking a subject as unchanged (without it: each file's size and modification time); a damaged subject is exported again, billed, said first")
	var wo watchOptions
	watch := fs.Bool("watch", false, "keep DIR current: sync, then poll the unmetered GET /v1/license every -interval and sync when the contentVersion or the grants move (failures back off exponentially, with jitter, up to 15m); Ctrl-C ends it")
	fs.DurationVar(&wo.Interval, "interval", 60*time.Second, "with -watch: how often to poll the contentVersion")
	fs.StringVar(&wo.Listen, "listen", "", "with -watch: also take content.changed webhooks on this address (host:port), signed with the endpoint's secret from LECTERN_WEBHOOK_SECRET (Standard Webhooks); a verified one syncs at once")
	lim, timeout := limitFlags(fs)
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage: lectern sync [flags] DIR [flags]\n\nMirror every granted subject into DIR (see lectern help).\n\nFlags:\n")
		fs.PrintDefaults()
	}
	dir, code := parseDir(fs, args, stderr)
	if code >= 0 {
		return code
	}
	o.Dir = dir
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	if o.Tiers, o.Subjects, err = parseSelection(tiers, subjects, set["tier"], set["subject"]); err != nil {
		fmt.Fprintln(stderr, "lectern sync:", err)
		return 2
	}
	cfg := clientConfig{URL: getenv("LECTERN_URL"), ClientID: getenv("LECTERN_CLIENT_ID"), Secret: getenv("LECTERN_CLIENT_SECRET"), Limits: *lim}
	if cfg.URL == "" || cfg.ClientID == "" || cfg.Secret == "" {
		fmt.Fprintln(stderr, "lectern sync: set LECTERN_URL, LECTERN_CLIENT_ID and LECTERN_CLIENT_SECRET")
		return 2
	}
	o.Progress = stderr
	if o.Quiet {
		o.Progress = io.Discard
	}
	if *watch || wo.Listen != "" || set["interval"] {
		return runWatch(ctx, cfg, o, wo, *watch, *timeout, getenv, stderr)
	}
	sum, err := syncWithin(ctx, *timeout, cfg, o)
	in := interruptedRun(ctx, err, &sum)
	if errors.As(err, new(*usageError)) {
		// A selection the organisation's grants or subjects cannot take:
		// refused before any export, as a bad flag is.
		fmt.Fprintln(stderr, "lectern sync:", err)
		return 2
	}
	if o.JSON {
		writeSummary(stdout, sum)
	} else {
		fmt.Fprintln(stderr, sum.line())
	}
	var stopped *stoppedError
	switch {
	case in != nil:
		fmt.Fprintf(stderr, "lectern sync: %s: %s is consistent; run lectern sync again to go on\n", in, o.Dir)
		return in.code()
	case errors.As(err, &stopped):
		fmt.Fprintln(stderr, "lectern sync: stopped:", stopped.Reason)
		return exitStopped
	case err != nil:
		fmt.Fprintln(stderr, "lectern sync:", err)
		return 1
	}
	return 0
}

// runWatch is lectern sync -watch.
func runWatch(ctx context.Context, cfg clientConfig, o syncOptions, wo watchOptions, watch bool, timeout time.Duration, getenv func(string) string, stderr io.Writer) int {
	usageErr := func(msg string) int {
		fmt.Fprintln(stderr, "lectern sync:", msg)
		return 2
	}
	switch {
	case !watch:
		return usageErr("-interval and -listen go with -watch")
	case o.DryRun:
		return usageErr("-dry-run and -watch: a dry run does nothing to watch for")
	case wo.Interval < time.Second:
		return usageErr("-interval is under 1s")
	}
	if wo.Listen != "" {
		key, err := parseWebhookSecret(getenv("LECTERN_WEBHOOK_SECRET"))
		if err != nil {
			return usageErr("-listen: " + err.Error())
		}
		wo.Secret = key
	}
	wo.Timeout = timeout
	err := watchDir(ctx, cfg, o, wo)
	var in *interrupted
	switch {
	case errors.As(err, &in):
		fmt.Fprintf(stderr, "lectern sync -watch: %s: %s is consistent\n", in, o.Dir)
		return in.code()
	case errors.As(err, new(*usageError)):
		fmt.Fprintln(stderr, "lectern sync -watch:", err)
		return 2
	}
	fmt.Fprintln(stderr, "lectern sync -watch:", err)
	return 1
}

// list splits a comma-separated flag value, dropping empty items.
func list(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// parseDir parses args, flags before or after the one directory (after
// --, everything is the directory), and returns it with -1; or, having
// printed why, the exit status: 0 for -h, 2 for a usage error.
func parseDir(fs *flag.FlagSet, args []string, stderr io.Writer) (string, int) {
	var dirs []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return "", 0 // flag printed the usage
			}
			return "", 2
		}
		rest := fs.Args()
		if n := len(args) - len(rest); len(rest) == 0 || n > 0 && args[n-1] == "--" {
			dirs = append(dirs, rest...)
			break
		}
		dirs, args = append(dirs, rest[0]), rest[1:]
	}
	if len(dirs) != 1 {
		fmt.Fprintln(stderr, fs.Name()+": want one directory")
		fs.Usage()
		return "", 2
	}
	return dirs[0], -1
}
