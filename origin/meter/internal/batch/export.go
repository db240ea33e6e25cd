package batch

import (
	"time"

	"github.com/lectern-api/lectern/origin/meter"
)

// NewStateForTest is the State of a batch of one op at now, before Load:
// for tests of what a backend remembers for such a batch (its Floor).
func NewStateForTest(now time.Time) *State {
	return newState([]Job{{Op: meter.Op{Org: "-", Now: now}}})
}
