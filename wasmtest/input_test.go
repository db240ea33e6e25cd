package wasmtest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// rawDo sends one request written by hand (a request line net/http's
// client cannot send) to base on a new connection and reads the answer.
func rawDo(t *testing.T, base, request string) answer {
	t.Helper()
	host := strings.TrimPrefix(base, "http://")
	conn, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(conn, strings.ReplaceAll(request, "{host}", host)); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%q to %s: %v", request, base, err)
	}
	defer res.Body.Close()
	a := answer{status: res.StatusCode, header: res.Header}
	if a.body, err = io.ReadAll(res.Body); err != nil {
		t.Fatal(err)
	}
	return a
}

// TestInputParity: bad input at the edges of HTTP (issue #13, point 7)
// answered alike through the edge and directly: an empty path and CONNECT
// (404, or 405 on a route's path), two Authorization lines (400
// BAD_REQUEST with an invalid_request challenge), two If-None-Match lines
// (one list: a tag on the second line is a 304, which the edge answers
// after a gate call), and an unknown 60 KB slug (echoed cut).
func TestInputParity(t *testing.T) {
	forEachBuild(t, func(t *testing.T, b *build) {
		o := shared(t)
		e := newEdge(t, b, o, nil)
		org := "input-" + b.name
		id, sec := o.org(t, `{"orgId":"`+org+`","contentGrants":`+allTiers+`}`, "content.read")
		tok := o.token(t, id, sec, "content.read")

		for i, tc := range []struct {
			name, request string
			status        int
			code          string
		}{
			{"absolute form without a path", "GET http://{host} HTTP/1.1\r\nHost: {host}\r\n", 404, "NOT_FOUND"},
			{"CONNECT authority form", "CONNECT {host} HTTP/1.1\r\nHost: {host}\r\n", 404, "NOT_FOUND"},
			{"CONNECT on a route", "CONNECT /v1/tiers HTTP/1.1\r\nHost: {host}\r\n", 405, "METHOD_NOT_ALLOWED"},
		} {
			req := tc.request + fmt.Sprintf("X-Request-Id: raw-%s-%03d\r\nConnection: close\r\n\r\n", b.name, i)
			viaEdge, direct := rawDo(t, e.url, req), rawDo(t, o.api, req)
			if direct.status != tc.status || direct.code() != tc.code {
				t.Errorf("%s: the origin answered %d %s, want %d %s", tc.name, direct.status, direct.code(), tc.status, tc.code)
			}
			compare(t, tc.name, viaEdge, direct)
		}

		bearer := "Bearer " + tok
		parity(t, e, o, nil, "in"+b.name, []scenario{
			{name: "two Authorization lines", method: "GET", target: "/v1/tiers",
				hdr: []string{"Authorization", bearer, "Authorization", bearer}, status: 400, code: "BAD_REQUEST"},
			{name: "two Authorization lines, the second not Bearer", method: "GET", target: "/v1/subjects?limit=0",
				hdr: []string{"Authorization", bearer, "Authorization", "Basic eDp5"}, status: 400, code: "BAD_REQUEST"},
			{name: "two Authorization lines combined", method: "GET", target: "/v1/tiers",
				hdr: []string{"Authorization", bearer + ", " + bearer}, status: 400, code: "BAD_REQUEST"},
			{name: "two Authorization lines, unknown route", method: "GET", target: "/v1/teachers",
				hdr: []string{"Authorization", bearer, "Authorization", bearer}, status: 404, code: "NOT_FOUND"},
			{name: "unknown 60 KB slug", method: "GET", target: "/v1/subjects/" + strings.Repeat("a", 60<<10),
				hdr: []string{"Authorization", bearer}, status: 404, code: "UNKNOWN_SUBJECT"},
		})
		if viaEdge := do(t, e.url, "GET", "/v1/subjects/"+strings.Repeat("a", 60<<10), "", "Authorization", bearer); len(viaEdge.body) > 1024 {
			t.Errorf("unknown 60 KB slug: a %d-byte answer", len(viaEdge.body))
		}

		// The edge learns the organisation's ETag inputs from a forward,
		// then answers the two-line conditional request after a gate call.
		first := do(t, e.url, "GET", "/v1/tiers", "", "Authorization", bearer)
		tag := first.header.Get("ETag")
		if first.status != 200 || tag == "" {
			t.Fatalf("GET /v1/tiers through the edge: %d, ETag %q", first.status, tag)
		}
		before := e.host.Stats()
		inm := []string{"Authorization", bearer, "If-None-Match", `W/"0000000000000000"`, "If-None-Match", tag}
		parity(t, e, o, nil, "inm"+b.name, []scenario{
			{name: "tag on the second If-None-Match line", method: "GET", target: "/v1/tiers", hdr: inm, status: 304},
		})
		if after := e.host.Stats(); after.Forwards != before.Forwards || after.Subrequests != before.Subrequests+1 {
			t.Errorf("two If-None-Match lines: %d forwards and %d gate calls, want 0 and 1",
				after.Forwards-before.Forwards, after.Subrequests-before.Subrequests)
		}
		parity(t, e, o, nil, "inm2"+b.name, []scenario{
			{name: "no tag on either If-None-Match line", method: "GET", target: "/v1/tiers",
				hdr: []string{"Authorization", bearer, "If-None-Match", `W/"0000000000000000"`, "If-None-Match", `"1"`}, status: 200},
		})
		if st := e.host.Stats(); st.Failures != 0 {
			t.Errorf("the host failed %d requests", st.Failures)
		}
	})
}
