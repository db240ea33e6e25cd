package wasmtest

import (
	"net/http/httptest"
	"testing"

	"github.com/lectern-api/lectern/internal/telemetry"
	"github.com/lectern-api/lectern/internal/telemetry/telemetrytest"
	"github.com/lectern-api/lectern/shared/logbuftest"
)

// TestTraceparent (issue #18, point 1): the edge host (the module under
// wazero, behind the access log as worker/cmd/edge serves it) passes the
// client's traceparent to the origin on a forward and on a gate call,
// makes one when none came, and both tiers log the same trace id under
// the same request id.
func TestTraceparent(t *testing.T) {
	forDeployedBuild(t, func(t *testing.T, b *build) {
		o, originLog := startOriginLog(t)
		org := "trace-" + b.name
		id, sec := o.org(t, `{"orgId":"`+org+`","contentGrants":`+allTiers+`}`, "content.read")
		tok := o.token(t, id, sec, "content.read")
		e := newEdge(t, b, o, nil)
		edgeLog := new(logbuftest.Buffer)
		log, err := telemetry.NewLogger(edgeLog, "json", "info")
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer((&telemetry.Access{Log: log, Edge: true}).Wrap(e.host))
		t.Cleanup(srv.Close)

		// both returns the edge's and the origin's access lines of request
		// reqID, and checks they log one trace id.
		both := func(reqID string) (edgeLine, originLine map[string]any) {
			t.Helper()
			edgeLine = telemetrytest.Line(t, edgeLog.String, reqID)
			originLine = telemetrytest.Line(t, originLog.String, reqID)
			if edgeLine["traceId"] != originLine["traceId"] {
				t.Errorf("%s: edge logged trace %v, origin %v", reqID, edgeLine["traceId"], originLine["traceId"])
			}
			return edgeLine, originLine
		}

		const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
		first := do(t, srv.URL, "GET", "/v1/tiers", "", "Authorization", "Bearer "+tok,
			"X-Request-Id", org+"-0001", "Traceparent", "00-"+trace+"-00f067aa0ba902b7-01")
		tag := first.header.Get("ETag")
		if first.status != 200 || tag == "" {
			t.Fatalf("through the edge: %d, ETag %q", first.status, tag)
		}
		el, ol := both(org + "-0001")
		if el["traceId"] != trace || ol["edge"] != "forward" || ol["org"] != org || ol["billed"] != "calls" ||
			ol["route"] != "/v1/tiers" || el["route"] != "/v1/tiers" {
			t.Errorf("forward: edge line %v, origin line %v", el, ol)
		}

		// A 304 at the edge: its gate call carries the trace.
		const trace2 = "0af7651916cd43dd8448eb211c80319c"
		if a := do(t, srv.URL, "GET", "/v1/tiers", "", "Authorization", "Bearer "+tok, "If-None-Match", tag,
			"X-Request-Id", org+"-0002", "Traceparent", "00-"+trace2+"-b7ad6b7169203331-01"); a.status != 304 {
			t.Fatalf("conditional through the edge: %d, want 304", a.status)
		}
		el, ol = both(org + "-0002")
		if el["traceId"] != trace2 || el["status"] != 304.0 || ol["edge"] != "gate" || ol["route"] != "/internal/gate" ||
			ol["status"] != 204.0 || ol["billed"] != "calls" {
			t.Errorf("gate: edge line %v, origin line %v", el, ol)
		}

		// None sent: the edge makes one, and the origin gets it.
		do(t, srv.URL, "GET", "/v1/tiers", "", "Authorization", "Bearer "+tok, "X-Request-Id", org+"-0003")
		if el, _ := both(org + "-0003"); len(el["traceId"].(string)) != 32 {
			t.Errorf("no trace made: %v", el)
		}
	})
}
