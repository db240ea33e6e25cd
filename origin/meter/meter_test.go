package meter_test

import (
	"testing"

	"github.com/lectern-api/lectern/origin/meter"
)

func TestAlarm(t *testing.T) {
	for _, tc := range []struct {
		read, granted int
		want          bool
	}{
		{40, 100, false}, {41, 100, true}, {2, 5, false}, {3, 5, true}, {0, 0, false}, {1, 0, false}, {1, 1, true},
	} {
		if got := meter.Alarm(tc.read, tc.granted); got != tc.want {
			t.Errorf("Alarm(%d, %d) = %v, want %v (more than 40%%)", tc.read, tc.granted, got, tc.want)
		}
	}
}
