package server

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/billing"
	"github.com/lectern-api/lectern/origin/licence"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/shared/logbuftest"
)

// holdTrip is the meters the server bills through, except that the op
// that trips the enumeration alarm is answered only once its request's
// context is done: the crossing read's client has gone, in the window
// where the suspension used to be written after the meter's commit.
type holdTrip struct {
	meter.Store
	tripped chan struct{} // closed by the tripping op
	late    atomic.Bool   // the request's context did not end in time
}

func (m *holdTrip) Apply(ctx context.Context, op meter.Op) (meter.Result, error) {
	res, err := m.Store.Apply(ctx, op)
	if err == nil && res.Tripped {
		close(m.tripped)
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
			m.late.Store(true)
		}
	}
	return res, err
}

// alarmOrg creates an org granted one subject of the small corpus and
// returns its token, the lesson path of class n, and the read that trips
// its alarm.
func alarmOrg(t *testing.T, h *harness, orgID string) (tok string, path func(n int) string, crossing int) {
	t.Helper()
	sub := h.corpus().Subject("topics", "photography")
	if sub == nil {
		t.Fatal("the small corpus has no topics/photography")
	}
	granted := len(sub.Lessons)
	crossing = granted*2/5 + 1
	if billing.GrantedLessons(h.corpus(), []string{sub.Ref()}) != granted || crossing >= granted {
		t.Fatalf("granted %d, crossing %d", granted, crossing)
	}
	return h.org(orgID, sub.Ref()), func(n int) string { return "/v1/lessons/" + sub.Ref() + "/" + strconv.Itoa(n) }, crossing
}

// issue #14, point 1: the alarm commits with the read that trips it, so a
// client that cancels that read cannot leave the organisation active. The
// meter's commit does not depend on the request's context, and nothing
// after it has to run for the suspension to hold.
func TestAlarmCrossingReadCancelled(t *testing.T) {
	hold := &holdTrip{tripped: make(chan struct{})}
	logs := &logbuftest.Buffer{}
	h := newHarnessOpts(t, smallContent(t, ""), harnessOptions{
		meters: func(m meter.Store) meter.Store { hold.Store = m; return hold },
		logger: slog.New(slog.NewTextHandler(logs, nil)),
	})
	tok, path, crossing := alarmOrg(t, h, "alarm")
	for n := 1; n < crossing; n++ {
		h.ok(path(n), tok)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-hold.tripped
		cancel()
	}()
	req, err := http.NewRequestWithContext(ctx, "GET", h.api+path(crossing), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	if resp, err := h.client.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the crossing read was answered %d: its client did not cancel", resp.StatusCode)
	}
	<-hold.tripped
	if lic := h.ok("/v1/license", tok); lic["status"] != licence.StatusSuspended {
		t.Errorf("/v1/license status %v after the crossing read's client cancelled", lic["status"])
	}
	h.fails(path(1), tok, 403, "ORG_SUSPENDED")
	if hold.late.Load() {
		t.Errorf("the server did not see the client cancel within 10 s")
	}
	if d := h.usage("alarm").distinct; d != crossing {
		t.Errorf("distinct lessons %d, want %d", d, crossing)
	}
	// The trip is an operator event, logged once, by the crossing read's
	// handler after the meter answers it: that handler may still be
	// finishing when the checks above are done.
	trips := func() int { return strings.Count(logs.String(), "enumeration alarm: organisation suspended") }
	for start := time.Now(); trips() == 0 && time.Since(start) < 5*time.Second; {
		time.Sleep(5 * time.Millisecond)
	}
	if n := trips(); n != 1 {
		t.Errorf("the trip was logged %d times, want 1; log:\n%s", n, logs.String())
	}
}

// A client that cancels the crossing read as soon as it is sent: either
// the read was withdrawn before the meter took it (not counted, not
// suspended) or it was committed with the alarm; never counted without it.
func TestAlarmCrossingReadCancelledEarly(t *testing.T) {
	h := newHarness(t)
	for i := range 8 {
		org := "early" + strconv.Itoa(i)
		tok, path, crossing := alarmOrg(t, h, org)
		for n := 1; n < crossing; n++ {
			h.ok(path(n), tok)
		}
		ctx, cancel := context.WithCancel(context.Background())
		trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { cancel() }}
		req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), "GET", h.api+path(crossing), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		if resp, err := h.client.Do(req); err == nil {
			resp.Body.Close()
		}
		cancel()
		// The server may still be answering the cancelled read: wait for
		// the meter to settle on one outcome or the other.
		var counted int
		var status any
		for start := time.Now(); ; {
			counted = h.usage(org).distinct
			status = h.ok("/v1/license", tok)["status"]
			if (counted == crossing) == (status == licence.StatusSuspended) || time.Since(start) > 5*time.Second {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if (counted == crossing) != (status == licence.StatusSuspended) {
			t.Errorf("%s: %d distinct lessons (crossing at %d), status %v: counted without the alarm, or the alarm without the count", org, counted, crossing, status)
		}
	}
}

// issue #14, point 3: a reload to another corpus version keeps the day's
// record (lessons count by id), so reading on across it trips the alarm at
// the same read, and the admin reading is the same whichever version the
// origin serves.
func TestAlarmAcrossReload(t *testing.T) {
	h := newHarness(t)
	v1 := h.content.Load()
	v2 := smallContent(t, "2030-01-02")
	if v1.ContentVersion == v2.ContentVersion {
		t.Fatalf("both corpora are %s", v1.ContentVersion)
	}
	tok, path, crossing := alarmOrg(t, h, "alarm")
	for n := 1; n < crossing; n++ {
		if n%2 == 0 {
			h.content.Store(v2)
		} else {
			h.content.Store(v1)
		}
		h.ok(path(n), tok)
		h.ok(path(1), tok) // read again under the other version: counted once
	}
	o, err := h.store.GetOrg(context.Background(), "alarm")
	if err != nil {
		t.Fatal(err)
	}
	var reads []any
	for _, ct := range []*Content{v1, v2} {
		h.content.Store(ct)
		_, extras, err := h.srv.OrgExtras(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		reads = append(reads, extras["enumeration"].(map[string]any)["lessonsRead"])
	}
	if reads[0] != crossing-1 || reads[1] != crossing-1 {
		t.Errorf("admin lessonsRead under %s and %s: %v, want %d from both", v1.ContentVersion, v2.ContentVersion, reads, crossing-1)
	}
	h.content.Store(v2)
	h.ok(path(crossing), tok)
	h.fails(path(1), tok, 403, "ORG_SUSPENDED")
	h.content.Store(v1)
	h.fails(path(1), tok, 403, "ORG_SUSPENDED")
}
