package server

import "github.com/lectern-api/lectern/origin/corpus"

// Content is a corpus with what serving it needs precomputed: everything
// that does not depend on the caller. A corpus reload builds a new Content
// and swaps it in; a request keeps the Content it began with.
type Content struct {
	*corpus.Corpus
	// (lessons) precomputed lesson, transcript, quiz and media renderings: lessons.go
	// (lists) precomputed subject and class rows: lists.go
	// (search) the search index: search.go
	// (testprep) precomputed test-prep catalog and items: testprep.go
}

// Build precomputes c for serving.
func Build(c *corpus.Corpus) (*Content, error) {
	ct := &Content{Corpus: c}
	// (lessons) build
	// (lists) build
	// (search) build
	// (testprep) build
	return ct, nil
}
