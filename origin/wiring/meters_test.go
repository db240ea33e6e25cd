package wiring

import (
	"errors"
	"slices"
	"testing"

	"github.com/lectern-api/lectern/origin/meter"
)

// TestBilled: what an op billed, from its outcome (billing's rules: a
// spent monthly quota bills nothing, an hourly cap hit bills the call).
func TestBilled(t *testing.T) {
	one := int64(1)
	call := []meter.Stage{
		{{Meter: meter.MonthCalls, N: 1, Limit: &one}},
		{{Meter: meter.HourCalls, N: 1, Limit: &one, Force: true}},
	}
	read := append(append([]meter.Stage(nil), call...), meter.Stage{{Meter: meter.HourLessonReads, N: 1}})
	mint := append(append([]meter.Stage(nil), call...), meter.Stage{{Meter: meter.HourMints, N: 3}}, meter.Stage{{Meter: meter.MonthDownloads, N: 3}})
	prep := append(append([]meter.Stage(nil), call...), meter.Stage{{Meter: meter.HourLessonReads, N: 1}, {Meter: meter.MonthTestprepItems, N: 10, Shorten: true}})
	refused := func(s meter.Step) meter.Result { return meter.Result{Refused: &s} }
	for _, tc := range []struct {
		name   string
		stages []meter.Stage
		res    meter.Result
		err    error
		want   []string
	}{
		{"a call", call, meter.Result{}, nil, []string{"calls"}},
		{"a lesson read", read, meter.Result{}, nil, []string{"calls", "lessonreads"}},
		{"a mint", mint, meter.Result{}, nil, []string{"calls", "mints", "downloads"}},
		{"monthly quota spent", call, refused(call[0][0]), nil, nil},
		{"hourly cap hit", call, refused(call[1][0]), nil, []string{"calls"}},
		{"mint cap hit", mint, refused(mint[2][0]), nil, []string{"calls"}},
		{"downloads spent", mint, refused(mint[3][0]), nil, []string{"calls", "mints"}},
		{"test-prep page", prep, meter.Result{Granted: 4}, nil, []string{"calls", "lessonreads", "testprepitems"}},
		{"test-prep allowance spent", prep, meter.Result{Granted: 0}, nil, []string{"calls", "lessonreads"}},
		{"suspended", read, meter.Result{Suspended: true}, nil, nil},
		{"billed by another origin", mint, meter.Result{Duplicate: true, LedgerIDs: []int64{1, 2, 3}}, nil, nil},
		{"excluded by its rival (a refund after the ship)", mint, meter.Result{Excluded: true}, nil, nil},
		{"store error", read, meter.Result{}, errors.New("down"), nil},
	} {
		got := billed(meter.Op{Stages: tc.stages}, tc.res, tc.err)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: billed %q, want %q", tc.name, got, tc.want)
		}
	}
}
