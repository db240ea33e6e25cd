package wazero

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lectern-api/lectern/internal/httpsig"
	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/edgesig"
	"github.com/lectern-api/lectern/shared/lease"
	"github.com/lectern-api/lectern/shared/reqid"
)

// The host's side of leases (docs/edge.md, "Leases"): the module decides
// everything about a lease; the host performs the module's background
// subrequests (lease requests, usage reports), logs each leased 304 before
// answering it (usage.go), asks the module to flush its usage every
// lease.ReportInterval while leases may have some and when it closes, and
// takes the origin's revoke pushes.

// startLeases opens the usage log, starts the replay of earlier runs'
// records and the flush ticker.
func (h *Host) startLeases() error {
	if h.cfg.UsageLog == "" {
		return errors.New("edge host: leases need a usage log (Config.UsageLog)")
	}
	u, pending, err := openUsageLog(h.cfg.UsageLog, h.cfg.Logger)
	if err != nil {
		return err
	}
	h.usage = u
	if len(pending) > 0 {
		h.replaying = make(map[string]int64, len(pending))
		for _, r := range pending {
			h.replaying[r.Lease] = r.Used
		}
		h.bg.Add(1)
		go func() {
			defer h.bg.Done()
			h.replay(h.bgCtx, replayPath(h.cfg.UsageLog), pending, usageRetry)
		}()
	}
	h.tickStop, h.tickDone = make(chan struct{}), make(chan struct{})
	go h.tick()
	return nil
}

// stopLeases stops the ticker and reports the usage not yet reported,
// bounded by the subrequest timeout. What it cannot report is in the
// usage log, for the next start.
func (h *Host) stopLeases() {
	if h.tickStop == nil {
		return
	}
	close(h.tickStop)
	<-h.tickDone
	h.tickStop = nil
	ctx, cancel := context.WithTimeout(context.Background(), h.cfg.SubrequestTimeout)
	defer cancel()
	if err := h.Flush(ctx); err != nil {
		h.cfg.Logger.Warn("edge: report lease usage at close", "err", err)
	}
}

// tick flushes every lease.ReportInterval while a lease may have usage to
// report: since a leased 304 or a background subrequest, and until a flush
// finds nothing to send.
func (h *Host) tick() {
	defer close(h.tickDone)
	t := time.NewTicker(lease.ReportInterval)
	defer t.Stop()
	for {
		select {
		case <-h.tickStop:
			return
		case <-t.C:
		}
		if !h.dirty.Swap(false) {
			continue
		}
		ctx, cancel := context.WithTimeout(h.bgCtx, h.cfg.SubrequestTimeout)
		if err := h.Flush(ctx); err != nil {
			h.cfg.Logger.Warn("edge: report lease usage", "err", err)
			h.dirty.Store(true)
		}
		cancel()
	}
}

// Flush asks every instance for its usage not yet acknowledged, sends it
// to the origin and waits for the answers (the ticker does this every
// lease.ReportInterval; tests call it to have it done now). It fails if
// an instance's report is not answered 204.
func (h *Host) Flush(ctx context.Context) error {
	h.mu.Lock()
	pool := append([]*instance(nil), h.pool...)
	h.mu.Unlock()
	var errs []error
	for _, in := range pool {
		errs = append(errs, h.flush(ctx, in))
	}
	return errors.Join(errs...)
}

func (h *Host) flush(ctx context.Context, in *instance) error {
	out, err := h.do(in, Control, controlMessage{Op: "flush", Now: h.now()})
	if err != nil {
		if in.isDead() {
			h.replace(in)
		}
		return fmt.Errorf("flush: %w", err)
	}
	switch out.Kind {
	case "done":
		return nil // nothing to report
	case "subrequest":
	default:
		return fmt.Errorf("flush answered %q", out.Kind)
	}
	// Something was sent: look again at the next tick (the module may
	// have held some back, or the answer may fail).
	h.dirty.Store(true)
	msg, _ := h.subrequest(ctx, nil, out)
	status, failure := msg.Status, msg.Error
	h.acknowledged(out.URL, out.Body, status)
	h.observeBackground(out.URL, status, msg.Body)
	msg.Handle, msg.Now = out.Handle, h.now()
	if _, err := h.do(in, Resume, msg); err != nil {
		return fmt.Errorf("flush: resume: %w", err)
	}
	if status != http.StatusNoContent {
		return fmt.Errorf("usage report to %s answered %d %s", out.URL, status, failure)
	}
	return nil
}

// background performs a module's background subrequest (a lease request,
// a usage report) in a goroutine of its own, bounded by SubrequestTimeout
// and cancelled by Close, and resumes its handle on in with the answer
// (status 0 on failure). No request waits for it.
func (h *Host) background(in *instance, bg Background) {
	h.bgMu.Lock()
	defer h.bgMu.Unlock()
	if h.bgClosed {
		return // the module treats it as failed when it is never answered
	}
	h.dirty.Store(true)
	h.bg.Add(1)
	go func() {
		defer h.bg.Done()
		msg, _ := h.subrequest(h.bgCtx, nil, &Output{Method: bg.Method, URL: bg.URL, Headers: bg.Headers, Body: bg.Body,
			Signatures: bg.Signatures, Retry: bg.Retry})
		h.acknowledged(bg.URL, bg.Body, msg.Status)
		h.observeBackground(bg.URL, msg.Status, msg.Body)
		msg.Handle, msg.Now = bg.Handle, h.now()
		out, err := h.do(in, Resume, msg)
		switch {
		case err != nil:
			h.cfg.Logger.Warn("edge: background subrequest", "url", bg.URL, "err", err)
		case out.Kind != "done":
			h.cfg.Logger.Warn("edge: background subrequest answered", "url", bg.URL, "kind", out.Kind, "status", out.Status, "body", out.Body)
		default:
			h.stats.backgrounds.Add(1)
		}
	}()
}

// acknowledged reads the reports a lease request or usage report carried
// (body) once the origin has acknowledged them (a 200 to the one, a 204
// to the other): the leases reported final are settled in the usage log.
func (h *Host) acknowledged(url, body string, status int) {
	if h.usage == nil {
		return
	}
	var rs []lease.Report
	switch {
	case status == http.StatusOK && strings.HasSuffix(url, lease.Path):
		r, err := lease.ParseRequest([]byte(body))
		if err != nil {
			return
		}
		rs = r.Reports
	case status == http.StatusNoContent && strings.HasSuffix(url, lease.UsagePath):
		var err error
		if rs, err = lease.ParseReports([]byte(body)); err != nil {
			return
		}
	}
	h.usage.settled(rs)
}

// logUse logs a leased 304 before it is answered.
func (h *Host) logUse(u *LeaseUse) error {
	if h.usage == nil {
		return errors.New("a leased 304 without leases configured")
	}
	return h.usage.append(u.ID, u.Used)
}

// serveRevoke answers the origin's push, POST lease.RevokePath: each
// instance drops (or, with keep, only reports) the leases named, and the
// answer is their usage, lease.AppendReports. A request the edge key did
// not sign is not served here (false): the module answers it as any path
// outside /v1, 404.
func (h *Host) serveRevoke(w http.ResponseWriter, r *http.Request) bool {
	id := r.Header.Get("X-Request-Id")
	sig := r.Header.Get(edgesig.Header)
	if sig == "" || r.Method != http.MethodPost {
		return false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, lease.MaxBody+1))
	if err != nil {
		h.cfg.Logger.Warn("edge: revoke: read the body", "err", err)
		return false
	}
	m := httpsig.Message(edgesig.Revoke, r, edgesig.BodyHash(body))
	if err := h.revoke.Accept(sig, &m, h.now()); err != nil {
		h.cfg.Logger.Warn("edge: revoke push refused", "requestId", id, "err", err)
		r.Body = http.NoBody
		return false
	}
	id = reqid.Keep(id)
	revoke, err := lease.ParseRevoke(body)
	if err != nil {
		writeError(w, id, apierr.New(apierr.BadRequest, "The body is not a revoke message: "+err.Error()+"."))
		return true
	}
	h.mu.Lock()
	pool := append([]*instance(nil), h.pool...)
	h.mu.Unlock()
	var reports []lease.Report
	for _, in := range pool {
		out, err := h.do(in, Control, controlMessage{Op: "revoke", Now: h.now(), Body: string(body)})
		if err != nil {
			if in.isDead() {
				h.replace(in)
			}
			h.fail(w, fmt.Errorf("revoke: %w", err))
			return true
		}
		switch out.Kind {
		case "response": // the module refused the message
			writeOutput(w, id, out)
			return true
		case "done":
		default:
			h.fail(w, fmt.Errorf("revoke answered %q", out.Kind))
			return true
		}
		rs, err := lease.ParseReports([]byte(out.Body))
		if err != nil {
			h.fail(w, fmt.Errorf("revoke answered %.200q: %w", out.Body, err))
			return true
		}
		reports = append(reports, rs...)
	}
	reports = h.replayed(revoke.Leases, reports)
	b := lease.AppendReports(nil, reports)
	// The revoked leases stay live in the usage log: should this answer
	// not reach the origin, the next start reports them from the log.
	wh := w.Header()
	wh.Set("Content-Type", "application/json")
	wh.Set("Content-Length", strconv.Itoa(len(b)))
	wh.Set("X-Request-Id", id)
	wh.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	w.Write(b)
	h.stats.revokes.Add(1)
	return true
}

// replayed adds to a revoke's reports those of the named leases no
// instance holds whose usage from an earlier run is still being replayed:
// final, as the replay reports them. Without it the origin would close
// such a lease at what it had recorded, and bill the replay's rest only
// within what the quota still leaves.
func (h *Host) replayed(ids []string, reports []lease.Report) []lease.Report {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, id := range ids {
		used, ok := h.replaying[id]
		if ok && !slices.ContainsFunc(reports, func(r lease.Report) bool { return r.Lease == id }) {
			reports = append(reports, lease.Report{Lease: id, Used: used, Final: true})
		}
	}
	return reports
}

// writeError answers e in the API's error body.
func writeError(w http.ResponseWriter, id string, e *apierr.Error) {
	writeErrorStatus(w, apierr.Status(e.Code), id, e)
}

// writeErrorStatus is writeError with another status than e's code's.
func writeErrorStatus(w http.ResponseWriter, status int, id string, e *apierr.Error) {
	body := e.AppendJSON(nil, id)
	wh := w.Header()
	wh.Set("Content-Type", "application/json")
	wh.Set("Content-Length", strconv.Itoa(len(body)))
	wh.Set("X-Request-Id", id)
	wh.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(body)
}

// writeOutput answers a module's response output.
func writeOutput(w http.ResponseWriter, id string, out *Output) {
	wh := w.Header()
	for _, kv := range out.Headers {
		wh.Add(kv[0], kv[1])
	}
	if wh.Get("X-Request-Id") == "" {
		wh.Set("X-Request-Id", id)
	}
	w.WriteHeader(out.Status)
	io.WriteString(w, out.Body)
}
