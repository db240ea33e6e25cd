package main

import (
	"testing"

	"github.com/lectern-api/lectern/internal/deptest"
)

// TestShipsNoDevCode: the origin command ships (README, Layout), so it
// links no test kit, build tool or tools/internal package (deptest.Dev).
func TestShipsNoDevCode(t *testing.T) { deptest.ShipsNoDevCode(t) }
