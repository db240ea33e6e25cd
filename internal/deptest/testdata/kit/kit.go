// Package kit is a test kit whose name does not say so: TestLinksFindsDevCode
// holds Links to finding it by its import of testing.
package kit

import "testing"

// Skip skips t.
func Skip(t testing.TB) { t.Skip() }
