package telemetry

import (
	"crypto/rand"
	"encoding/hex"
)

// TraceHeader is the W3C Trace Context request header
// (https://www.w3.org/TR/trace-context/#traceparent-header).
const TraceHeader = "Traceparent"

// TraceID returns the trace id of a traceparent value, and whether the
// value is valid: version 00 is exactly "00-<32 hex>-<16 hex>-<2 hex>",
// lowercase, neither id all zeros; a later version (not ff) may carry more
// after a further "-", which is ignored (§3.2.4: a parser of version 00
// reads what it knows of a later one).
func TraceID(v string) (string, bool) {
	if len(v) < 55 || (len(v) > 55 && (v[:2] == "00" || v[55] != '-')) {
		return "", false
	}
	if v[2] != '-' || v[35] != '-' || v[52] != '-' || v[:2] == "ff" {
		return "", false
	}
	version, trace, parent, flags := v[:2], v[3:35], v[36:52], v[53:55]
	if !lowerHex(version) || !lowerHex(trace) || !lowerHex(parent) || !lowerHex(flags) ||
		allZero(trace) || allZero(parent) {
		return "", false
	}
	return trace, true
}

// NewTraceparent returns a traceparent of version 00 with a new random
// trace id and parent id, not sampled (flags 00): what a tier starts a
// trace with when its request brought no valid one.
func NewTraceparent() string {
	var b [24]byte
	rand.Read(b[:]) // never fails (crypto/rand, Go 1.24+)
	for allZero(hex.EncodeToString(b[:16])) || allZero(hex.EncodeToString(b[16:])) {
		rand.Read(b[:])
	}
	return "00-" + hex.EncodeToString(b[:16]) + "-" + hex.EncodeToString(b[16:]) + "-00"
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func allZero(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '0' {
			return false
		}
	}
	return true
}
