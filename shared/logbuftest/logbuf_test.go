package logbuftest

import (
	"strings"
	"sync"
	"testing"
)

// TestConcurrentWrites keeps every line whole while goroutines write and
// the test reads (run under -race by make test).
func TestConcurrentWrites(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				b.Write([]byte("one line\n"))
				_ = b.Len()
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if got, want := b.String(), strings.Repeat("one line\n", 800); got != want {
		t.Errorf("got %d bytes, want %d lines of %q", len(got), 800, "one line\n")
	}
	if b.Len() != 800*len("one line\n") {
		t.Errorf("Len = %d, want %d", b.Len(), 800*len("one line\n"))
	}
}
