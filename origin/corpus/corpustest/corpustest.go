// Package corpustest gives tests the small generated corpus, made once
// per test binary: every package that renders or ships lessons tests on
// the same one without a copy of its setup.
package corpustest

import (
	"os"
	"sync"
	"testing"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/corpus/gen"
)

var (
	smallOnce sync.Once
	small     *corpus.Corpus
	smallErr  error
)

// Small is the small corpus of seed 1, loaded (it lives in memory; its
// directory goes).
func Small(tb testing.TB) *corpus.Corpus {
	tb.Helper()
	smallOnce.Do(func() {
		dir, err := os.MkdirTemp("", "lectern-small-")
		if err != nil {
			smallErr = err
			return
		}
		defer os.RemoveAll(dir)
		if _, smallErr = gen.Write(dir, gen.Options{Seed: 1, Small: true}); smallErr != nil {
			return
		}
		small, smallErr = corpus.Load(dir)
	})
	if smallErr != nil {
		tb.Fatal(smallErr)
	}
	return small
}
