// Package telemetrytest is for tests: it finds a request's access log
// line (internal/telemetry) in what a server logged. A line is written once
// the handler returns, which may be after the client has read the
// answer, so Line waits for it.
package telemetrytest

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// wait bounds how long Line waits for a line: far above what writing it
// takes, it only stops a test whose line never comes.
const wait = 10 * time.Second

// Line returns the JSON access log line ("msg":"request") of the request
// whose id is requestID, decoded, from what logs returns (read afresh
// until the line is there); the test fails when none comes.
func Line(t testing.TB, logs func() string, requestID string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		for _, l := range strings.Split(logs(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "request" && m["requestId"] == requestID {
				return m
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no access log line of request %s in:\n%s", requestID, logs())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
