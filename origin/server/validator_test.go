package server

import (
	"testing"

	"github.com/lectern-api/lectern/shared/route"
)

// Exactly the served routes with a derived validator (the exports' for
// format=inline) have a step the gate can run: the gate answers 412 to
// the others, whose 304 (if any) is decided after work.
func TestStepIffDerived(t *testing.T) {
	s := New(Config{})
	for i := range route.All() {
		rt := &route.All()[i]
		e, served := s.endpoints[rt.ID]
		if !served {
			continue
		}
		if got, want := e.validate != nil, rt.Validator == route.Derived || rt.Validator == route.Inline; got != want {
			t.Errorf("route %d (%s): has a step %v, want %v", rt.ID, rt.OperationID, got, want)
		}
	}
}
