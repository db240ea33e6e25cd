package proctest

import (
	"context"
	"io"
	"os/exec"
	"strings"
	"testing"
)

// Origin is the origin command (origin/cmd/origin) run as a child process.
type Origin struct {
	*Proc
	// API, IdP and Admin are the base URLs it serves, the API's without
	// /v1; "" for a listener it runs without (printed "off").
	API, IdP, Admin string
}

// StartOrigin starts cmd, a built origin command its caller set up (its
// directory and settings; listeners on port 0 are fine), and waits until
// it prints the addresses it serves: it serves them then. What it prints
// after them (its log, the demo's lines) goes to rest; nil discards it.
// It is killed when the test ends, as Start's children are.
func StartOrigin(t testing.TB, cmd *exec.Cmd, rest io.Writer) (*Origin, error) {
	p, o, err := Start(t, "origin", cmd, originReady(rest))
	if err != nil {
		return nil, err
	}
	o.Proc = p
	return o, nil
}

// LaunchOrigin is StartOrigin for a caller that is no test, or an origin
// that outlives the test that started it: the caller kills it (Kill) or
// interrupts it (Interrupt). ctx ends the wait for its addresses, as in
// Launch.
func LaunchOrigin(ctx context.Context, cmd *exec.Cmd, rest io.Writer) (*Origin, error) {
	return LaunchOriginUntil(ctx, cmd, rest, nil)
}

// LaunchOriginUntil is LaunchOrigin, ready at the first line after the
// addresses that until accepts (nil: at the addresses): what the origin
// prints once it serves, such as the demo organisation it creates on a
// new database (tools/bench's children take their clients from it).
// Every line it printed before goes to rest too.
func LaunchOriginUntil(ctx context.Context, cmd *exec.Cmd, rest io.Writer, until func(line string) bool) (*Origin, error) {
	p, o, err := Launch(ctx, "origin", cmd, rest, originReadyUntil(rest, until))
	if err != nil {
		return nil, err
	}
	o.Proc = p
	return o, nil
}

// originReady reads the addresses the origin prints once it serves
// (origin/wiring's Announce), in this order:
//
//	API (direct)       http://127.0.0.1:41234/v1
//	identity provider  http://127.0.0.1:41235
//	admin API          http://127.0.0.1:41236
//
// It accepts the admin API's line, the last; the lines before it go to
// rest, so that rest holds all the origin printed.
func originReady(rest io.Writer) func(line string) (*Origin, bool) {
	o := new(Origin)
	return func(line string) (*Origin, bool) {
		if rest != nil {
			io.WriteString(rest, line+"\n")
		}
		line = strings.TrimSpace(line)
		for _, f := range []struct {
			label string
			dst   *string
		}{{"API (direct)", &o.API}, {"identity provider", &o.IdP}, {"admin API", &o.Admin}} {
			if v, ok := strings.CutPrefix(line, f.label); ok {
				if v = strings.TrimSuffix(strings.TrimSpace(v), "/v1"); v != "off" {
					*f.dst = v
				}
				return o, f.label == "admin API"
			}
		}
		return o, false
	}
}

// originReadyUntil is originReady, accepting instead the first line
// after the addresses that until accepts; nil until: originReady.
func originReadyUntil(rest io.Writer, until func(line string) bool) func(line string) (*Origin, bool) {
	addrs := originReady(rest)
	if until == nil {
		return addrs
	}
	served := false
	return func(line string) (*Origin, bool) {
		o, ok := addrs(line)
		if served {
			return o, until(line)
		}
		served = ok
		return o, false
	}
}

// Edge is the edge command (worker/cmd/edge) run as a child process.
type Edge struct {
	*Proc
	URL string // its base URL, without /v1
}

// StartEdge starts cmd, a built edge command its caller set up, and
// waits until it prints its address (EdgeURL): it serves then. It is
// killed when the test ends, as Start's children are.
func StartEdge(t testing.TB, cmd *exec.Cmd) (*Edge, error) {
	p, url, err := Start(t, "edge", cmd, EdgeURL)
	if err != nil {
		return nil, err
	}
	return &Edge{Proc: p, URL: url}, nil
}

// EdgeURL reads the edge command's base URL from the line of its
// printout that names it ("API (edge)  http://host:port/v1"), and
// reports whether line is that line: the edge's ready line, for Start,
// Launch and Await.
func EdgeURL(line string) (string, bool) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), "API (edge)")
	if !ok {
		return "", false
	}
	return strings.TrimSuffix(strings.TrimSpace(rest), "/v1"), true
}
