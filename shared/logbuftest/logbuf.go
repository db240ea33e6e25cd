// Package logbuftest is for tests: a log sink that servers' goroutines write
// while the test reads it. It sits in shared/ (the folders at the top are
// fixed: README, Layout) so that the origin's, the tools' and wasmtest's tests
// share it; the product never imports it.
package logbuftest

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer safe for concurrent use. Its zero value is
// empty and ready.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p to the buffer.
func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// Len is the number of bytes written so far.
func (l *Buffer) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Len()
}

// String is what was written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
