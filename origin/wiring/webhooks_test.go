package wiring

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/licence"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/store/sqlitestore"
	"github.com/lectern-api/lectern/origin/webhook"
)

// resultStore is a meter.Store whose Apply answers the next result.
type resultStore struct {
	meter.Store
	next meter.Result
}

func (s *resultStore) Apply(context.Context, meter.Op) (meter.Result, error) { return s.next, nil }

// TestMeterEvents: the meters' ops send quota.threshold when a monthly
// meter reaches 80% and 100% of its limit, once for each level however
// many ops and origins see it, none for an hourly cap or a duplicate op;
// a refused step sends 100% only when the count is at the limit (a
// mint of 900 downloads with 500 left sends nothing, one at 90% none
// beyond 80%), and an op that jumps past both levels sends 80%, then
// 100%; and org.suspended (reason enumeration_alarm) for the read that
// trips the alarm.
func TestMeterEvents(t *testing.T) {
	ctx := context.Background()
	st, err := sqlitestore.New(ctx, filepath.Join(t.TempDir(), "lectern.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	org := licence.NewOrg(now)
	org.ID = "acme"
	if err := st.CreateOrg(ctx, org); err != nil {
		t.Fatal(err)
	}
	out := webhook.New(webhook.Config{Store: st, Key: make([]byte, 32), Now: func() time.Time { return now }})
	if _, err := out.AddEndpoint(ctx, "acme", "https://hooks.example.com/", webhook.Types); err != nil {
		t.Fatal(err)
	}
	rs := &resultStore{}
	origins := []*Meters{
		{Store: rs, Events: NewMeterEvents(out, slog.New(slog.DiscardHandler))},
		{Store: rs, Events: NewMeterEvents(out, slog.New(slog.DiscardHandler))},
	}
	limit, hourly := int64(10), int64(5)
	op := meter.Op{Org: meter.Key(org), Now: now, Stages: []meter.Stage{
		{{Meter: meter.MonthCalls, N: 1, Limit: &limit}},
		{{Meter: meter.HourCalls, N: 1, Limit: &hourly, Force: true}},
	}}
	apply := func(i int, res meter.Result) {
		t.Helper()
		rs.next = res
		if _, err := origins[i].Apply(ctx, op); err != nil {
			t.Fatal(err)
		}
	}
	calls := func(month, hour int64) meter.Counters {
		var c meter.Counters
		c[meter.MonthCalls] = month
		c[meter.HourCalls] = hour
		return c
	}
	apply(0, meter.Result{After: calls(7, 5)}) // the hourly cap at 100%: no event
	apply(0, meter.Result{After: calls(8, 5)}) // 80%
	apply(0, meter.Result{After: calls(9, 5)})
	apply(1, meter.Result{After: calls(9, 5)}) // another origin sees 80% too
	apply(1, meter.Result{After: calls(10, 5), Duplicate: true})
	apply(1, meter.Result{After: calls(9, 5), Refused: &op.Stages[0][0]}) // refused at 90%: no 100%
	apply(0, meter.Result{After: calls(10, 5)})                           // 100%

	downloads, big := int64(1000), int64(900)
	mint := meter.Op{Org: meter.Key(org), Now: now, Stages: []meter.Stage{
		{{Meter: meter.MonthCalls, N: 1, Limit: &limit}},
		{{Meter: meter.MonthDownloads, N: big, Limit: &downloads}},
	}}
	var c meter.Counters
	c[meter.MonthCalls], c[meter.MonthDownloads] = 10, 500
	rs.next = meter.Result{After: c, Refused: &mint.Stages[1][0]} // 900 asked, 500 left: nothing
	if _, err := origins[0].Apply(ctx, mint); err != nil {
		t.Fatal(err)
	}
	c[meter.MonthDownloads] = 1000 // 500 to 1000 in one op: 80%, then 100%
	rs.next = meter.Result{After: c}
	if _, err := origins[1].Apply(ctx, mint); err != nil {
		t.Fatal(err)
	}
	read := op
	read.Read = &meter.Read{Lesson: "high/algebra/1", Granted: 200}
	rs.next = meter.Result{After: calls(10, 5), Tripped: true, LessonsRead: 81}
	if _, err := origins[0].Apply(ctx, read); err != nil {
		t.Fatal(err)
	}

	ds, err := st.Claim(ctx, now, now.Add(time.Minute), "test", 100, 100, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	for _, d := range ds {
		var env struct {
			Type string         `json:"type"`
			Data map[string]any `json:"data"`
		}
		if err := json.Unmarshal(d.Event.Payload, &env); err != nil {
			t.Fatal(err)
		}
		env.Data["type"] = env.Type
		got = append(got, env.Data)
	}
	want := []map[string]any{
		{"type": "quota.threshold", "meter": "calls", "percent": 80.0, "used": 8.0, "limit": 10.0, "month": "2026-11"},
		{"type": "quota.threshold", "meter": "calls", "percent": 100.0, "used": 10.0, "limit": 10.0, "month": "2026-11"},
		{"type": "quota.threshold", "meter": "downloads", "percent": 80.0, "used": 1000.0, "limit": 1000.0, "month": "2026-11"},
		{"type": "quota.threshold", "meter": "downloads", "percent": 100.0, "used": 1000.0, "limit": 1000.0, "month": "2026-11"},
		{"type": "org.suspended", "reason": "enumeration_alarm", "lessonsRead": 81.0, "grantedLessons": 200.0, "day": "2026-11-22"},
	}
	if len(got) != len(want) {
		t.Fatalf("events %v, want %d", got, len(want))
	}
	for i, w := range want {
		for k, v := range w {
			if got[i][k] != v {
				t.Errorf("event %d: %s = %v, want %v (%v)", i, k, got[i][k], v, got[i])
			}
		}
		if got[i]["orgId"] != "acme" {
			t.Errorf("event %d: orgId %v", i, got[i]["orgId"])
		}
	}
}
