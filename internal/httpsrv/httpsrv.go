// Package httpsrv builds the HTTP servers of every Lectern listener (the
// origin's API, identity provider and admin API, and the local edge) with
// one set of limits on how long and how much a client may send, and makes
// the answers net/http writes on its own speak the API's error body.
//
// A server is two parts used together:
//
//	srv := httpsrv.New(handler, cfg)
//	go srv.Serve(httpsrv.Listener(ln, cfg))
//
// Limits (docs/decisions/server-limits-and-net-https-own-answers.md):
//
//   - The request line and headers must arrive within ReadHeader of the
//     first byte (http.Server.ReadHeaderTimeout); a connection that sends
//     nothing is closed after as long.
//   - The whole request, headers and body, must arrive within Read of its
//     first byte (http.Server.ReadTimeout). net/http lifts that deadline
//     once the body has been read to its end (it then reads the
//     connection in the background to notice a client going away), so a
//     handler may work longer than Read; a body the handler never reads
//     is discarded by net/http under the same deadline. The API answers a
//     body it could not read in time 408 (origin/server, withBody).
//   - A body is at most MaxBodyBytes: a longer declared Content-Length is
//     refused before the handler with 400 BAD_REQUEST, a longer chunked
//     body fails the handler's read (http.MaxBytesReader). With
//     HandlerBoundsBody the declared length is left to the handler (the
//     admin API checks its token first); the read still fails past
//     MaxBodyBytes.
//   - The whole answer must be written within Write of the end of the
//     request's headers (http.Server.WriteTimeout), and a kept-alive
//     connection waits Idle for its next request.
//   - Header fields are at most MaxHeaderBytes (net/http allows 4 KiB
//     more for the request line).
package httpsrv

import (
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/reqid"
)

// Limits bound what a client may take of a server. A zero field takes
// its value from Default.
type Limits struct {
	ReadHeader     time.Duration // request line and headers, from their first byte
	Read           time.Duration // the whole request, body included, from its first byte
	Write          time.Duration // the answer, from the end of the request's headers
	Idle           time.Duration // a kept-alive connection's wait for its next request
	MaxHeaderBytes int           // the header fields
	MaxBodyBytes   int64         // the body
	// HandlerBoundsBody leaves a declared Content-Length over
	// MaxBodyBytes to the handler rather than refusing it before the
	// handler: for a handler whose own checks come first (the admin API:
	// its token, 401 before 413) and which bounds its bodies itself.
	HandlerBoundsBody bool
}

// Default is what every listener uses unless configured otherwise; the
// reasons for each value are in docs/decisions/server-limits-and-net-https-own-answers.md.
var Default = Limits{
	// Real header blocks are a few KiB (a token is about 1 KiB).
	ReadHeader:     10 * time.Second,
	MaxHeaderBytes: 64 << 10,
	// Request bodies are small: a mint of 100 ids is about 4 KiB, a
	// progress write or a token form under 1 KiB, an admin body at most
	// 1 MiB: 60 s is 17 KiB/s for it. (The admin listener takes a
	// forensics leak of up to 32 MiB, origin/wiring.Servers.ServeAdmin:
	// 550 KB/s, on loopback by default.)
	// The edge reads a body only when it forwards it, which may come
	// after a wait for the JWKS (at most 35 s parked, docs/edge.md): the
	// deadline must be past that wait.
	Read:         60 * time.Second,
	MaxBodyBytes: 1 << 20,
	// The largest answer is an export of at most 6 MB: 2 minutes is
	// 50 KB/s for it, and covers the slowest work (a corpus reload).
	Write: 2 * time.Minute,
	// Above the 90 s for which the edge's transport (net/http's default)
	// keeps an idle connection to the origin, so the origin does not
	// close one under a forward that is being sent on it.
	Idle: 2 * time.Minute,
}

func (l Limits) orDefault() Limits {
	d := Default
	if l.ReadHeader > 0 {
		d.ReadHeader = l.ReadHeader
	}
	if l.Read > 0 {
		d.Read = l.Read
	}
	if l.Write > 0 {
		d.Write = l.Write
	}
	if l.Idle > 0 {
		d.Idle = l.Idle
	}
	if l.MaxHeaderBytes > 0 {
		d.MaxHeaderBytes = l.MaxHeaderBytes
	}
	if l.MaxBodyBytes > 0 {
		d.MaxBodyBytes = l.MaxBodyBytes
	}
	d.HandlerBoundsBody = l.HandlerBoundsBody
	return d
}

// Config is what New and Listener need.
type Config struct {
	Limits Limits
	// IDPrefix begins the request ids of the answers this package writes
	// (default "req_", the origin's; the edge host's are "edge_").
	IDPrefix string
	// Logger receives net/http's own error log and a line for each
	// answer written here (default discarded).
	Logger *slog.Logger
}

func (c Config) logger() *slog.Logger {
	if c.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Logger
}

func (c Config) newID() string {
	if c.IDPrefix == "" {
		return reqid.New()
	}
	return reqid.NewOf(c.IDPrefix, reqid.RandomBytes)
}

// New returns a server for h under cfg's limits. Serve it on
// Listener(ln, cfg), which turns net/http's own error answers into the
// API's error body.
func New(h http.Handler, cfg Config) *http.Server {
	l := cfg.Limits.orDefault()
	return &http.Server{
		Handler:           &limited{h: h, l: l, cfg: cfg},
		ReadHeaderTimeout: l.ReadHeader,
		ReadTimeout:       l.Read,
		WriteTimeout:      l.Write,
		IdleTimeout:       l.Idle,
		MaxHeaderBytes:    l.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(cfg.logger().Handler(), slog.LevelWarn),
	}
}

// limited bounds the size of every request's body before h sees it.
type limited struct {
	h   http.Handler
	l   Limits
	cfg Config
}

func (s *limited) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength > s.l.MaxBodyBytes && !s.l.HandlerBoundsBody {
		id := s.cfg.newID()
		s.cfg.logger().Info("request body over the limit", "requestId", id, "contentLength", r.ContentLength, "remote", r.RemoteAddr)
		e := &apierr.Error{Code: apierr.BadRequest, Parameter: "body",
			Message: "The request body is over " + strconv.FormatInt(s.l.MaxBodyBytes, 10) + " bytes."}
		body := e.AppendJSON(nil, id)
		h := w.Header()
		h.Set("X-Request-Id", id)
		h.Set("Cache-Control", "private")
		h.Set("Content-Type", "application/json")
		h.Set("Content-Length", strconv.Itoa(len(body)))
		h.Set("Connection", "close") // the body is not read
		w.WriteHeader(e.Status())
		w.Write(body)
		return
	}
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = http.MaxBytesReader(w, r.Body, s.l.MaxBodyBytes)
	}
	s.h.ServeHTTP(w, r)
}
