package telemetry

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/lectern-api/lectern/shared/edgesig"
	"github.com/lectern-api/lectern/shared/lease"
	"github.com/lectern-api/lectern/shared/link"
	"github.com/lectern-api/lectern/shared/route"
)

// Record is what the access log line of one request says beyond what the
// wire shows: its organisation, its error code, what it billed and, at the
// origin, whether the edge signed it. The handlers fill it in; Access
// writes it. Safe for concurrent use.
type Record struct {
	mu     sync.Mutex
	route  string // the route's template, set by Access
	org    string
	code   string
	billed []string // meter names, in the order first billed
	edge   string   // "gate" or "forward": a call the edge signed
	// refused is the purpose and reason of an internal signature the
	// origin refused on this request (lectern_edge_signatures_refused_total).
	refused [2]string
}

type recordKey struct{}

// NewContext returns ctx carrying rec.
func NewContext(ctx context.Context, rec *Record) context.Context {
	return context.WithValue(ctx, recordKey{}, rec)
}

// FromContext returns the Record of the request whose context ctx is, or
// nil (whose methods do nothing) when it has none.
func FromContext(ctx context.Context) *Record {
	rec, _ := ctx.Value(recordKey{}).(*Record)
	return rec
}

// SetOrg records the request's organisation.
func (r *Record) SetOrg(id string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.org = id
	r.mu.Unlock()
}

// Org is the request's organisation as recorded so far ("" for none).
func (r *Record) Org() string {
	if r == nil {
		return ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.org
}

// SetCode records the error code the request was answered with.
func (r *Record) SetCode(code string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.code = code
	r.mu.Unlock()
}

// SetEdge records that the edge signed the request: kind is "gate" or
// "forward".
func (r *Record) SetEdge(kind string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.edge = kind
	r.mu.Unlock()
}

// SignatureRefused records that the request's internal signature, for
// purpose (forward, gate, lease, usage, revoke), was refused for reason
// (malformed, stale, mismatch, host, replayed).
func (r *Record) SignatureRefused(purpose, reason string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.refused = [2]string{purpose, reason}
	r.mu.Unlock()
}

// Billed records that the request billed the meters named (meter.Meter's
// String: calls, lessonreads, ...); a name already recorded is not
// repeated.
func (r *Record) Billed(names ...string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
outer:
	for _, n := range names {
		for _, have := range r.billed {
			if have == n {
				continue outer
			}
		}
		r.billed = append(r.billed, n)
	}
}

// Access writes the access log line of every request to the handler it
// wraps, and counts it in Metrics.
type Access struct {
	Log     *slog.Logger
	Metrics *Metrics // nil: none
	// Edge is set at the edge host. There the request's traceparent
	// header is made the one logged (a valid incoming one is kept, any
	// other replaced by a new one), so that the module forwards it and the
	// host hands it to gate calls (worker/wazero); elsewhere it is only
	// read. And the line says nothing of billing: the origin bills, and
	// its line of the same request id says what.
	Edge bool
}

// Wrap returns h with the access log.
func (a *Access) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		var trace string
		ok := false
		if tps := r.Header.Values(TraceHeader); len(tps) == 1 { // W3C: several are none
			trace, ok = TraceID(tps[0])
		}
		if !ok {
			tp := NewTraceparent()
			trace, _ = TraceID(tp)
			if a.Edge {
				r.Header.Set(TraceHeader, tp)
			}
		}
		rec := &Record{route: Template(r.Method, r.URL.EscapedPath())}
		lw := &logWriter{ResponseWriter: w}
		h.ServeHTTP(lw, r.WithContext(NewContext(r.Context(), rec)))
		d := time.Since(start)
		if lw.status == 0 {
			lw.status = http.StatusOK // nothing written: net/http answers 200
		}
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if rec.code == "" && lw.status >= 400 {
			rec.code = errorCode(lw.head.Bytes())
		}
		method := Method(r.Method)
		a.Metrics.request(rec, method, lw.status, d)
		level := slog.LevelInfo
		if lw.status >= 500 {
			level = slog.LevelError
		}
		if !a.Log.Enabled(r.Context(), level) {
			return
		}
		billed := "none"
		if len(rec.billed) > 0 {
			billed = strings.Join(rec.billed, "+")
		}
		attrs := make([]slog.Attr, 0, 10)
		attrs = append(attrs,
			slog.String("requestId", w.Header().Get("X-Request-Id")),
			slog.String("traceId", trace),
			slog.String("method", method),
			slog.String("route", rec.route),
			slog.Int("status", lw.status))
		if rec.code != "" {
			attrs = append(attrs, slog.String("code", rec.code))
		}
		if rec.org != "" {
			attrs = append(attrs, slog.String("org", rec.org))
		}
		if rec.edge != "" {
			attrs = append(attrs, slog.String("edge", rec.edge))
		}
		if !a.Edge {
			attrs = append(attrs, slog.String("billed", billed))
		}
		attrs = append(attrs, slog.Float64("durationMs", float64(d.Microseconds())/1000))
		a.Log.LogAttrs(r.Context(), level, "request", attrs...)
	})
}

// Template is what the access log and the metrics name a request's route
// by, never its path (which holds ids, and a signed link's signature): the
// route table's pattern for a /v1 route (shared/route), the fixed paths
// as they are, "/files/{link}" for a signed link, and "unmatched" for
// anything else.
func Template(method, path string) string {
	switch {
	case path == "/.well-known/oauth-protected-resource", path == edgesig.GatePath,
		path == lease.Path, path == lease.UsagePath, path == HealthPath, path == ReadyPath:
		return path
	case strings.HasPrefix(path, link.Prefix):
		return link.Prefix + "{link}"
	}
	if rt, _, err := route.Match(method, path); err == nil {
		return rt.Pattern
	}
	if rt, _, err := route.Match(http.MethodGet, path); err == nil {
		return rt.Pattern // a 405: the path is a route's, the method not
	}
	return "unmatched"
}

// Method is the request method as a label: one of HTTP's, or "_OTHER"
// (the OpenTelemetry conventions' bound on what a client may make up).
func Method(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "_OTHER"
}

// maxHead is how much of an error answer's body logWriter keeps to read
// its code from: the spec's error bodies put the code first.
const maxHead = 512

// logWriter records the status, and the head of an error answer's body.
type logWriter struct {
	http.ResponseWriter
	status int
	head   bytes.Buffer
}

func (w *logWriter) WriteHeader(status int) {
	if w.status == 0 && status >= 200 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *logWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if w.status >= 400 && w.head.Len() < maxHead {
		w.head.Write(p[:min(len(p), maxHead-w.head.Len())])
	}
	return w.ResponseWriter.Write(p)
}

// ReadFrom passes a copy from r on to the connection's writer, so that a
// file (a download link's asset or bundle, served by http.ServeContent)
// goes out by sendfile rather than through Write; an error answer is
// copied through Write, whose head is read for its code.
func (w *logWriter) ReadFrom(r io.Reader) (int64, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if rf, ok := w.ResponseWriter.(io.ReaderFrom); ok && w.status < 400 {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{w}, r)
}

// Flush passes a flush on (the export streams flush).
func (w *logWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *logWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// errorCode is the code of an error body ({"error":{"code":...}}), or ""
// when head is not one. The edge host learns a refusal's code this way:
// the module writes the body.
func errorCode(head []byte) string {
	const prefix, key = `{"error":{`, `"code":"`
	if !bytes.HasPrefix(head, []byte(prefix)) {
		return ""
	}
	i := bytes.Index(head, []byte(key))
	if i < 0 {
		return ""
	}
	rest := head[i+len(key):]
	end := bytes.IndexByte(rest, '"')
	if end <= 0 {
		return ""
	}
	for _, c := range rest[:end] {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c == '_') { // the spec's codes (401s': invalid_token)
			return ""
		}
	}
	return string(rest[:end])
}
