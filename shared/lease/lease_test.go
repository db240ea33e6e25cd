package lease

import (
	"reflect"
	"testing"
)

func TestRoundTrips(t *testing.T) {
	req := Request{Want: 64, Revoke: "http://127.0.0.1:8787/internal/revoke",
		Reports: []Report{{Lease: "a1", Used: 12}, {Lease: "b-2_", Used: 40, Final: true}}}
	got, err := ParseRequest(AppendRequest(nil, &req))
	if err != nil || !reflect.DeepEqual(got, req) {
		t.Fatalf("request: %+v, %v", got, err)
	}
	ans := Answer{Lease: "L1", Org: "acme", Epoch: 3, ContentVersion: "2026-11-01", Grants: "g1", Calls: 64,
		ValidMs: 5000, Headers: [][2]string{{"X-Service-Content-Version", "2026-11-01"}, {"RateLimit-Policy", `"calls-month";q=10;w=2592000`}},
		RateLimits: []RateLimit{{Name: "calls-month", Remaining: 9, Reset: 1767225600}}}
	a, err := ParseAnswer(AppendAnswer(nil, &ans))
	if err != nil || !reflect.DeepEqual(a, ans) {
		t.Fatalf("answer: %+v, %v", a, err)
	}
	none := Answer{RetryMs: 1000}
	if a, err := ParseAnswer(AppendAnswer(nil, &none)); err != nil || a.Calls != 0 || a.RetryMs != 1000 {
		t.Fatalf("no lease: %+v, %v", a, err)
	}
	rv := Revoke{Leases: []string{"L1", "L2"}, Keep: true}
	if r, err := ParseRevoke(AppendRevoke(nil, &rv)); err != nil || !reflect.DeepEqual(r, rv) {
		t.Fatalf("revoke: %+v, %v", r, err)
	}
	if rs, err := ParseReports(AppendReports(nil, req.Reports)); err != nil || !reflect.DeepEqual(rs, req.Reports) {
		t.Fatalf("reports: %+v, %v", rs, err)
	}
	h := string(AppendHeader(nil, req.Reports))
	if h != "a1=12, b-2_=40;final" {
		t.Fatalf("header %q", h)
	}
	if rs, err := ParseHeader(h); err != nil || !reflect.DeepEqual(rs, req.Reports) {
		t.Fatalf("header: %+v, %v", rs, err)
	}
}

func TestRefusals(t *testing.T) {
	for _, b := range []string{
		``, `[]`, `{"want":7}`, `{"want":1025}`, `{"want":8,"want":8}`, `{"want":8,"x":1}`,
		`{"want":8,"reports":[{"lease":"bad id","used":1}]}`, `{"want":8,"reports":[{"lease":"a","used":-1}]}`,
		`{"want":8,"reports":{}}`, `{"want":8,"revoke":1}`,
	} {
		if _, err := ParseRequest([]byte(b)); err == nil {
			t.Errorf("request %s accepted", b)
		}
	}
	for _, b := range []string{
		`{"calls":5,"validMs":100}`, // a lease without id, org, version, grants
		`{"lease":"L","org":"o","contentVersion":"v","grants":"g","calls":5,"validMs":0,"epoch":0,"retryMs":0}`,
		`{"lease":"L","org":"o","contentVersion":"v","grants":"g","calls":5000,"validMs":5,"epoch":0,"retryMs":0}`,
		`{"calls":0,"validMs":0,"epoch":0,"retryMs":0,"headers":[["a"]]}`,
		`{"calls":0,"validMs":0,"epoch":0,"retryMs":0,"headers":[["a","b\r\nc"]]}`,
	} {
		if _, err := ParseAnswer([]byte(b)); err == nil {
			t.Errorf("answer %s accepted", b)
		}
	}
	for _, h := range []string{"a", "a=", "a=-1", "=3", "a b=3", "a=1;fin"} {
		if _, err := ParseHeader(h); err == nil {
			t.Errorf("header %q accepted", h)
		}
	}
	if _, err := ParseRevoke([]byte(`{"keep":true}`)); err == nil {
		t.Error("revoke without leases accepted")
	}
}

func TestSize(t *testing.T) {
	for used, want := range map[int64]int64{0: 8, 3: 8, 4: 8, 5: 10, 300: 600, 512: 1024, 5000: 1024} {
		if got := Size(used); got != want {
			t.Errorf("Size(%d) = %d, want %d", used, got, want)
		}
	}
}

// FuzzMessages: no input makes a parser panic, and what a parser accepts
// is written back to something it reads the same.
func FuzzMessages(f *testing.F) {
	f.Add([]byte(`{"want":8,"revoke":"","reports":[{"lease":"a","used":1,"final":true}]}`))
	f.Add([]byte(`{"lease":"L","org":"o","epoch":1,"contentVersion":"v","grants":"g","calls":8,"validMs":5,"retryMs":0,"headers":[["a","b"]],"rateLimits":[{"name":"calls-month","remaining":3,"reset":9}]}`))
	f.Add([]byte(`{"leases":["a"],"keep":true}`))
	f.Add([]byte(`a=1, b=2;final`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if r, err := ParseRequest(b); err == nil {
			if again, err := ParseRequest(AppendRequest(nil, &r)); err != nil || !reflect.DeepEqual(again, r) {
				t.Fatalf("request %q: %+v then %+v, %v", b, r, again, err)
			}
		}
		if a, err := ParseAnswer(b); err == nil {
			if again, err := ParseAnswer(AppendAnswer(nil, &a)); err != nil || !reflect.DeepEqual(again, a) {
				t.Fatalf("answer %q: %+v then %+v, %v", b, a, again, err)
			}
		}
		if r, err := ParseRevoke(b); err == nil {
			if again, err := ParseRevoke(AppendRevoke(nil, &r)); err != nil || !reflect.DeepEqual(again, r) {
				t.Fatalf("revoke %q: %+v then %+v, %v", b, r, again, err)
			}
		}
		if rs, err := ParseHeader(string(b)); err == nil && len(rs) > 0 {
			if again, err := ParseHeader(string(AppendHeader(nil, rs))); err != nil || !reflect.DeepEqual(again, rs) {
				t.Fatalf("header %q: %+v then %+v, %v", b, rs, again, err)
			}
		}
	})
}
