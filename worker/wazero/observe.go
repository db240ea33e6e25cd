package wazero

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/lectern-api/lectern/shared/edgesig"
	"github.com/lectern-api/lectern/shared/lease"
)

// Observer is told what a Host does, for an edge's metrics (worker/cmd/edge
// counts them in Prometheus series; this package imports no metrics
// library). Its methods are called on requests' paths and from background
// work, at once: they must be quick and safe for concurrent use.
type Observer interface {
	// NotModified is a 304 answered to a client, by "lease" (within a
	// lease from the origin, no origin call), "gate" (the module's answer
	// after the origin's gate call) or "origin" (the origin's own 304 to a
	// forward, passed through).
	NotModified(by string)
	// OriginAttempt is one attempt of a subrequest at origin (its base
	// URL): kind is "forward", "gate", "lease", "usage" or "other"; err is
	// nil when the attempt got an answer, whatever its status.
	OriginAttempt(origin, kind string, err error)
	// Failover is a subrequest sent on to the next origin after its
	// attempt at origin failed.
	Failover(origin string)
	// Ejected is the liveness probes ejecting origin (true), or letting it
	// back into the rotation (false) (probe.go).
	Ejected(origin string, ejected bool)
	// LeaseRequest is the origin's answer to a lease request: "granted"
	// (a lease with calls), "none" (a 200 without a lease), "refused"
	// (another status) or "failed" (no answer).
	LeaseRequest(result string)
	// UsageReport is the origin's answer to a usage report (the module's,
	// the host's flush or its replay of the last run's log): "accepted"
	// (204), "refused" (another status) or "failed" (no answer).
	UsageReport(result string)
}

// Pool is the instance pool's state now: Instances configured, Busy of them
// inside a module call (the others idle: parked requests and subrequests
// in flight hold no instance).
type Pool struct {
	Instances, Busy int
}

// Pool returns the instance pool's state.
func (h *Host) Pool() Pool {
	h.mu.Lock()
	n := len(h.pool)
	h.mu.Unlock()
	return Pool{Instances: n, Busy: min(int(h.busy.Load()), n)}
}

// noObserver is the Observer of a Config without one.
type noObserver struct{}

func (noObserver) NotModified(string)                  {}
func (noObserver) OriginAttempt(string, string, error) {}
func (noObserver) Failover(string)                     {}
func (noObserver) Ejected(string, bool)                {}
func (noObserver) LeaseRequest(string)                 {}
func (noObserver) UsageReport(string)                  {}

// notModifiedBy names who answered a 304 (Observer.NotModified).
func notModifiedBy(out *Output) string {
	switch {
	case out.Lease != nil:
		return "lease"
	case out.Passthrough:
		return "origin"
	}
	return "gate"
}

// subrequestKind is an origin subrequest's kind (Observer.OriginAttempt),
// from its path.
func subrequestKind(out *Output) string {
	if out.Forward {
		return "forward"
	}
	path := out.URL
	if u, err := url.Parse(out.URL); err == nil {
		path = u.Path
	}
	switch {
	case strings.HasSuffix(path, edgesig.GatePath):
		return "gate"
	case strings.HasSuffix(path, lease.Path):
		return "lease"
	case strings.HasSuffix(path, lease.UsagePath):
		return "usage"
	}
	return "other"
}

// observeBackground tells the Observer how the origin answered a lease
// request or a usage report to u (status 0: no answer; body: the answer's).
func (h *Host) observeBackground(u string, status int, body *string) {
	switch {
	case strings.HasSuffix(u, lease.Path):
		result := "failed"
		switch {
		case status == http.StatusOK && body != nil:
			result = "none"
			if a, err := lease.ParseAnswer([]byte(*body)); err == nil && a.Calls > 0 {
				result = "granted"
			}
		case status != 0:
			result = "refused"
		}
		h.observer.LeaseRequest(result)
	case strings.HasSuffix(u, lease.UsagePath):
		h.observer.UsageReport(usageResult(status))
	}
}

// usageResult names a usage report's answer (Observer.UsageReport).
func usageResult(status int) string {
	switch status {
	case 0:
		return "failed"
	case http.StatusNoContent:
		return "accepted"
	}
	return "refused"
}
