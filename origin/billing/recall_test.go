package billing_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/lectern-api/lectern/origin/billing"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/store"
)

// reserving refuses its first op with Reserved, as a store whose leases
// hold the last calls does, and passes the next ones to the store.
type reserving struct {
	meter.Store
	refused int
}

func (r *reserving) Apply(ctx context.Context, op meter.Op) (meter.Result, error) {
	if r.refused == 0 {
		r.refused++
		step := op.Stages[0][0]
		return meter.Result{Refused: &step, Reserved: true}, nil
	}
	return r.Store.Apply(ctx, op)
}

type recaller []string

func (r *recaller) Recall(_ context.Context, org string) { *r = append(*r, org) }

// docs/edge.md, Leases: a call refused only for leases' reservations
// recalls them and is applied once more, so it is billed and served, not
// a false 429; without a Recaller the refusal stands.
func TestReservedRecalls(t *testing.T) {
	_, s := biller(t)
	var rc recaller
	b := &billing.Biller{Store: &reserving{Store: s}, Leases: &rc}
	o := org(func(o *store.Org) { o.Quota.Calls = n(10) })
	if _, err := b.Call(context.Background(), o, now); err != nil {
		t.Fatalf("after the recall: %v", err)
	}
	if len(rc) != 1 || rc[0] != "acme" {
		t.Errorf("recalls %v, want [acme]", rc)
	}
	usage(t, s, meter.MonthCalls, 1, meter.HourCalls, 1)

	b = &billing.Biller{Store: &reserving{Store: s}}
	if _, err := b.Call(context.Background(), o, now); err == nil {
		t.Error("a reserved refusal without a Recaller passed")
	}
}

// The limits of a call's bill are the RateLimit fields' meters, in their
// order, counted from the counts given.
func TestCallBillLimits(t *testing.T) {
	o := org(func(o *store.Org) { o.Quota.Calls, o.RateLimits.CallsPerHour = n(100), n(10) })
	var after meter.Counters
	after[meter.MonthCalls], after[meter.HourCalls] = 40, 12
	ls := billing.CallBill(o, now, after).Limits()
	if len(ls) != 2 || ls[0].Name != "calls-month" || ls[0].Left != 60 || ls[1].Name != "calls-hour" || ls[1].Left != 0 ||
		!ls[1].Reset.Equal(meter.NextHour(now)) || !ls[0].Reset.Equal(meter.NextMonth(now)) {
		t.Errorf("limits %+v", ls)
	}
	h := billing.CallBill(o, now, after).Headers()
	if len(h) != 2 || h[1].Value != `"calls-month";r=60;t=`+itoa(meter.NextMonth(now).Sub(now).Seconds())+`, "calls-hour";r=0;t=2700` {
		t.Errorf("headers %v", h)
	}
}

func itoa(f float64) string { return strconv.FormatInt(int64(f), 10) }
