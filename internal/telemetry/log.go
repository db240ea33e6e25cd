// Package telemetry is what an operator sees of a running origin or edge
// host (README, Environment): the structured access log (one
// line per request, log/slog, JSON or text by LECTERN_LOG_FORMAT, level
// by LECTERN_LOG_LEVEL), the Prometheus metrics the admin listener serves
// at GET /metrics (named after the OpenTelemetry HTTP semantic
// conventions), the unauthenticated GET /healthz and GET /readyz, and the
// W3C traceparent both tiers log and the edge passes on.
//
// A request's handlers tell the access log what only they know (its
// organisation, its error code, what it billed) through the Record that
// Access puts in the request's context; every method of a nil *Record,
// and of a nil *Metrics, does nothing, so code that runs without them
// (tools/bench, unit tests) needs no check.
//
// Never logged: the Authorization header, a token, a secret, a query
// string or a path (a signed link's signature is in its path): a line
// names the route's template (shared/route), not the path.
package telemetry

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// The settings' values (LECTERN_LOG_FORMAT, LECTERN_LOG_LEVEL) and their
// defaults.
const (
	FormatJSON = "json"
	FormatText = "text"

	DefaultFormat = FormatJSON
	DefaultLevel  = "info"
)

// ParseLevel reads a LECTERN_LOG_LEVEL: debug, info, warn or error, in any
// case.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("LECTERN_LOG_LEVEL=%q: want debug, info, warn or error", s)
}

// NewLogger returns the logger of the settings format and level, writing
// to w; "" is the default (DefaultFormat, DefaultLevel), as for a config
// made in code rather than parsed. A value it does not know is an error
// naming the variable, so a command refuses to start on it.
func NewLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	if format == "" {
		format = DefaultFormat
	}
	if level == "" {
		level = DefaultLevel
	}
	lv, err := ParseLevel(level)
	if err != nil {
		return nil, err
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case FormatJSON:
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case FormatText:
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("LECTERN_LOG_FORMAT=%q: want json or text", format)
}
