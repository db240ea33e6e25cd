// Package lease is the wire contract of the edge's licence-and-calls
// leases (docs/edge.md, "Leases"): the origin grants an edge instance, per
// organisation, a short lease on the licence state and a block of calls
// reserved against the organisation's quotas, and the edge answers
// revalidations with 304 within it, reporting cumulative usage.
//
// Both tiers compile this package: the origin encodes answers and decodes
// requests and reports, the edge the other way round. It builds under
// TinyGo (fastjson, no reflection).
package lease

import (
	"strconv"
	"strings"
	"time"

	"github.com/lectern-api/lectern/shared/jsoncheck"
	"github.com/lectern-api/lectern/shared/jsonenc"
	"github.com/valyala/fastjson"
)

// The internal endpoints, never under /v1. The first two are the origin's,
// the third the edge host's (where the host can take a push).
const (
	Path       = "/internal/lease"  // POST: a lease for the token's organisation, with reports
	UsagePath  = "/internal/usage"  // POST: reports only
	RevokePath = "/internal/revoke" // POST, on the edge host: drop (or settle) leases, answer their usage
)

// UsageHeader carries reports on a forwarded request (AppendHeader).
const UsageHeader = "X-Lectern-Usage"

// Sizes and times of the protocol.
const (
	MinCalls = 8    // the smallest block an edge asks for
	MaxCalls = 1024 // the largest block an edge asks for, and the origin grants
	// DefaultTTL is a lease's longest validity unless the origin is set
	// otherwise (LECTERN_LEASE_TTL).
	DefaultTTL = 5 * time.Second
	// ReportEvery and ReportInterval bound what an edge holds unreported:
	// it reports once a lease has this many unreported uses, or the
	// oldest of them is this old.
	ReportEvery    = 16
	ReportInterval = time.Second
	// MaxReports bounds the reports of one message.
	MaxReports = 64
	// MaxID bounds a lease id.
	MaxID = 64
	// MaxBody bounds every message of the protocol.
	MaxBody = 16 << 10
)

// Report is an edge's cumulative usage of one lease: Used 304s answered
// with it so far. Final says the edge will use it no more.
type Report struct {
	Lease string
	Used  int64
	Final bool
}

// Request is the body of POST Path.
type Request struct {
	Want    int64    // the block asked for, MinCalls to MaxCalls
	Revoke  string   // the edge host's revoke URL, "" when it can take no push
	Reports []Report // usage of this edge's earlier leases
}

// RateLimit is one capped meter a 304 reports in its RateLimit field: its
// name as RateLimit-Policy names it ("calls-month"), what was left of it
// when the lease was granted (before any use of the lease), and when it
// resets (unix seconds).
type RateLimit struct {
	Name      string
	Remaining int64
	Reset     int64
}

// Answer is the body of a 200 answer to POST Path. Calls 0 is no lease:
// the edge gates every 304 of the organisation and asks again after
// RetryMs.
type Answer struct {
	Lease          string
	Org            string
	Epoch          int64
	ContentVersion string
	Grants         string // etag.GrantsDigest of the organisation's grants
	Calls          int64
	ValidMs        int64 // counted by the edge from when it sent the request
	RetryMs        int64 // without a lease: when to ask again
	// Headers are the 304's fixed fields, in order, as a gated 304 would
	// carry them: every field but ETag, RateLimit and X-Request-Id, which
	// the edge sets per request.
	Headers    [][2]string
	RateLimits []RateLimit
}

// Revoke is the body of POST RevokePath: the leases to drop, or with Keep
// only to report (settle). The answer is a Reports body with one final
// report per lease dropped that the edge held; a lease it does not hold
// is left out.
type Revoke struct {
	Leases []string
	Keep   bool
}

// Error is a malformed message.
type Error string

func (e Error) Error() string { return string(e) }

// ValidID reports whether s is a lease id: 1 to MaxID of [A-Za-z0-9_-].
func ValidID(s string) bool {
	if len(s) == 0 || len(s) > MaxID {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Size is the block an edge asks for when its recent use comes to used
// 304s a validity period (worker/pipeline measures it on the lease it
// holds): about twice that, within MinCalls and MaxCalls.
func Size(used int64) int64 {
	return min(max(2*used, MinCalls), MaxCalls)
}

// AppendRequest appends r as JSON.
func AppendRequest(dst []byte, r *Request) []byte {
	dst = append(dst, `{"want":`...)
	dst = strconv.AppendInt(dst, r.Want, 10)
	dst = append(dst, `,"revoke":`...)
	dst = jsonenc.String(dst, r.Revoke)
	dst = append(dst, `,"reports":`...)
	dst = appendReports(dst, r.Reports)
	return append(dst, '}')
}

// ParseRequest reads a Request.
func ParseRequest(b []byte) (Request, error) {
	var r Request
	var p fastjson.Parser
	o, err := object(&p, b, "want", "revoke", "reports")
	if err != nil {
		return r, err
	}
	if r.Want, err = integer(o, "want", MinCalls, MaxCalls); err != nil {
		return r, err
	}
	if v := o.Get("revoke"); v != nil {
		s, e := v.StringBytes()
		if e != nil || len(s) > 2048 {
			return r, Error("revoke must be a URL string")
		}
		r.Revoke = string(s)
	}
	r.Reports, err = reports(o.Get("reports"))
	return r, err
}

// AppendReports appends {"reports":[...]}, the body of POST UsagePath and
// of the revoke endpoint's answer.
func AppendReports(dst []byte, rs []Report) []byte {
	dst = append(dst, `{"reports":`...)
	dst = appendReports(dst, rs)
	return append(dst, '}')
}

// ParseReports reads what AppendReports writes.
func ParseReports(b []byte) ([]Report, error) {
	var p fastjson.Parser
	o, err := object(&p, b, "reports")
	if err != nil {
		return nil, err
	}
	return reports(o.Get("reports"))
}

func appendReports(dst []byte, rs []Report) []byte {
	dst = append(dst, '[')
	for i, r := range rs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"lease":`...)
		dst = jsonenc.String(dst, r.Lease)
		dst = append(dst, `,"used":`...)
		dst = strconv.AppendInt(dst, r.Used, 10)
		if r.Final {
			dst = append(dst, `,"final":true`...)
		}
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

func reports(v *fastjson.Value) ([]Report, error) {
	if v == nil {
		return nil, nil
	}
	arr, err := v.Array()
	if err != nil || len(arr) > MaxReports {
		return nil, Error("reports must be an array of at most 64 reports")
	}
	var rs []Report // nil when empty, as when absent
	for _, e := range arr {
		o, err := e.Object()
		if err != nil || !only(o, "lease", "used", "final") {
			return nil, Error("a report is an object with lease, used and final")
		}
		var r Report
		v := o.Get("lease")
		if v == nil {
			return nil, Error("a report's lease is required")
		}
		id, err := v.StringBytes()
		if err != nil || !ValidID(string(id)) {
			return nil, Error("a report's lease must be a lease id")
		}
		r.Lease = string(id)
		if r.Used, err = integer(o, "used", 0, 1<<40); err != nil {
			return nil, err
		}
		if f := o.Get("final"); f != nil {
			if r.Final, err = f.Bool(); err != nil {
				return nil, Error("final must be a boolean")
			}
		}
		rs = append(rs, r)
	}
	return rs, nil
}

// AppendAnswer appends a as JSON.
func AppendAnswer(dst []byte, a *Answer) []byte {
	dst = append(dst, `{"lease":`...)
	dst = jsonenc.String(dst, a.Lease)
	dst = append(dst, `,"org":`...)
	dst = jsonenc.String(dst, a.Org)
	dst = append(dst, `,"epoch":`...)
	dst = strconv.AppendInt(dst, a.Epoch, 10)
	dst = append(dst, `,"contentVersion":`...)
	dst = jsonenc.String(dst, a.ContentVersion)
	dst = append(dst, `,"grants":`...)
	dst = jsonenc.String(dst, a.Grants)
	dst = append(dst, `,"calls":`...)
	dst = strconv.AppendInt(dst, a.Calls, 10)
	dst = append(dst, `,"validMs":`...)
	dst = strconv.AppendInt(dst, a.ValidMs, 10)
	dst = append(dst, `,"retryMs":`...)
	dst = strconv.AppendInt(dst, a.RetryMs, 10)
	dst = append(dst, `,"headers":[`...)
	for i, h := range a.Headers {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '[')
		dst = jsonenc.String(dst, h[0])
		dst = append(dst, ',')
		dst = jsonenc.String(dst, h[1])
		dst = append(dst, ']')
	}
	dst = append(dst, `],"rateLimits":[`...)
	for i, r := range a.RateLimits {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"name":`...)
		dst = jsonenc.String(dst, r.Name)
		dst = append(dst, `,"remaining":`...)
		dst = strconv.AppendInt(dst, r.Remaining, 10)
		dst = append(dst, `,"reset":`...)
		dst = strconv.AppendInt(dst, r.Reset, 10)
		dst = append(dst, '}')
	}
	return append(dst, "]}"...)
}

// ParseAnswer reads an Answer. A lease (Calls > 0) must name its id,
// organisation, version and grants and a positive validity.
func ParseAnswer(b []byte) (Answer, error) {
	var a Answer
	var p fastjson.Parser
	o, err := object(&p, b, "lease", "org", "epoch", "contentVersion", "grants", "calls", "validMs", "retryMs", "headers", "rateLimits")
	if err != nil {
		return a, err
	}
	a.Lease, a.Org = str(o, "lease"), str(o, "org")
	a.ContentVersion, a.Grants = str(o, "contentVersion"), str(o, "grants")
	if a.Epoch, err = integer(o, "epoch", 0, 1<<62); err != nil {
		return a, err
	}
	if a.Calls, err = integer(o, "calls", 0, MaxCalls); err != nil {
		return a, err
	}
	if a.ValidMs, err = integer(o, "validMs", 0, 1<<31); err != nil {
		return a, err
	}
	if a.RetryMs, err = integer(o, "retryMs", 0, 1<<31); err != nil {
		return a, err
	}
	if hs := o.Get("headers"); hs != nil {
		arr, err := hs.Array()
		if err != nil || len(arr) > 32 {
			return a, Error("headers must be an array of at most 32 fields")
		}
		for _, h := range arr {
			kv, err := h.Array()
			if err != nil || len(kv) != 2 {
				return a, Error("a header is a [name, value] pair")
			}
			n, err1 := kv[0].StringBytes()
			v, err2 := kv[1].StringBytes()
			if err1 != nil || err2 != nil || len(n) == 0 || strings.ContainsAny(string(v), "\r\n") {
				return a, Error("a header is a [name, value] pair of strings")
			}
			a.Headers = append(a.Headers, [2]string{string(n), string(v)})
		}
	}
	if rl := o.Get("rateLimits"); rl != nil {
		arr, err := rl.Array()
		if err != nil || len(arr) > 8 {
			return a, Error("rateLimits must be an array of at most 8 meters")
		}
		for _, e := range arr {
			m, err := e.Object()
			if err != nil || !only(m, "name", "remaining", "reset") {
				return a, Error("a rate limit is an object with name, remaining and reset")
			}
			r := RateLimit{Name: str(m, "name")}
			if r.Remaining, err = integer(m, "remaining", 0, 1<<62); err != nil {
				return a, err
			}
			if r.Reset, err = integer(m, "reset", 0, 1<<40); err != nil {
				return a, err
			}
			if r.Name == "" {
				return a, Error("a rate limit needs its name")
			}
			a.RateLimits = append(a.RateLimits, r)
		}
	}
	if a.Calls > 0 && (!ValidID(a.Lease) || a.Org == "" || a.ContentVersion == "" || a.Grants == "" || a.ValidMs <= 0) {
		return a, Error("a lease needs its id, org, contentVersion, grants and a positive validMs")
	}
	return a, nil
}

// AppendRevoke appends r as JSON.
func AppendRevoke(dst []byte, r *Revoke) []byte {
	dst = append(dst, `{"leases":[`...)
	for i, id := range r.Leases {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonenc.String(dst, id)
	}
	dst = append(dst, `],"keep":`...)
	dst = strconv.AppendBool(dst, r.Keep)
	return append(dst, '}')
}

// ParseRevoke reads a Revoke.
func ParseRevoke(b []byte) (Revoke, error) {
	var r Revoke
	var p fastjson.Parser
	o, err := object(&p, b, "leases", "keep")
	if err != nil {
		return r, err
	}
	v := o.Get("leases")
	if v == nil {
		return r, Error("leases is required")
	}
	arr, err := v.Array()
	if err != nil || len(arr) > MaxReports {
		return r, Error("leases must be an array of at most 64 lease ids")
	}
	for _, e := range arr {
		id, err := e.StringBytes()
		if err != nil || !ValidID(string(id)) {
			return r, Error("leases must hold lease ids")
		}
		r.Leases = append(r.Leases, string(id))
	}
	if k := o.Get("keep"); k != nil {
		if r.Keep, err = k.Bool(); err != nil {
			return r, Error("keep must be a boolean")
		}
	}
	return r, nil
}

// AppendHeader appends reports as an X-Lectern-Usage value:
// "<lease>=<used>" or "<lease>=<used>;final", comma-separated.
func AppendHeader(dst []byte, rs []Report) []byte {
	for i, r := range rs {
		if i > 0 {
			dst = append(dst, ", "...)
		}
		dst = append(dst, r.Lease...)
		dst = append(dst, '=')
		dst = strconv.AppendInt(dst, r.Used, 10)
		if r.Final {
			dst = append(dst, ";final"...)
		}
	}
	return dst
}

// ParseHeader reads what AppendHeader writes.
func ParseHeader(v string) ([]Report, error) {
	var rs []Report
	for part := range strings.SplitSeq(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if len(rs) == MaxReports {
			return nil, Error("too many reports")
		}
		var r Report
		if s, ok := strings.CutSuffix(part, ";final"); ok {
			part, r.Final = s, true
		}
		id, n, ok := strings.Cut(part, "=")
		if !ok || !ValidID(id) {
			return nil, Error("a usage report is <lease>=<used>")
		}
		used, err := strconv.ParseInt(n, 10, 64)
		if err != nil || used < 0 || used > 1<<40 {
			return nil, Error("a usage report's count must be a non-negative integer")
		}
		r.Lease, r.Used = id, used
		rs = append(rs, r)
	}
	return rs, nil
}

// object parses b as a flat-enough JSON object with only the names given,
// none repeated.
func object(p *fastjson.Parser, b []byte, names ...string) (*fastjson.Object, error) {
	if len(b) > MaxBody || !jsoncheck.Shallow(b, 4) {
		return nil, Error("the message is too large or too deep")
	}
	v, err := p.ParseBytes(b)
	if err != nil {
		return nil, Error("the message is not JSON")
	}
	o, err := v.Object()
	if err != nil || !only(o, names...) {
		return nil, Error("the message is not an object of the expected members")
	}
	return o, nil
}

// only reports whether o's members are among names, none twice.
func only(o *fastjson.Object, names ...string) bool {
	ok := true
	var seen uint32
	o.Visit(func(k []byte, _ *fastjson.Value) {
		i := 0
		for i < len(names) && names[i] != string(k) {
			i++
		}
		if i == len(names) || seen&(1<<i) != 0 {
			ok = false
			return
		}
		seen |= 1 << i
	})
	return ok
}

func str(o *fastjson.Object, name string) string {
	v := o.Get(name)
	if v == nil {
		return ""
	}
	s, err := v.StringBytes()
	if err != nil {
		return ""
	}
	return string(s)
}

func integer(o *fastjson.Object, name string, lo, hi int64) (int64, error) {
	v := o.Get(name)
	if v == nil {
		return 0, Error(name + " is required")
	}
	n, err := v.Int64()
	if err != nil || n < lo || n > hi {
		return 0, Error(name + " must be an integer from " + strconv.FormatInt(lo, 10) + " to " + strconv.FormatInt(hi, 10))
	}
	return n, nil
}
