package edgesig

import (
	"errors"
	"fmt"
	"testing"
)

// Reason names each refusal of Accept for the origin's metric label.
func TestReason(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{ErrMalformed, "malformed"}, {ErrStale, "stale"}, {ErrInvalid, "mismatch"}, {ErrHost, "host"}, {ErrUnsigned, "unsigned"}, {ErrVersion, "version"},
		{ErrReplayed, "replayed"}, {errors.New("x"), "other"}, {fmt.Errorf("wrapped: %w", ErrStale), "other"},
	} {
		if got := Reason(tc.err); got != tc.want {
			t.Errorf("Reason(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
