package server

import (
	"github.com/lectern-api/lectern/origin/changes"
	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/lessondoc"
	"github.com/lectern-api/lectern/origin/openapi"
	"github.com/lectern-api/lectern/origin/search"
)

// Content is a corpus with what serving it needs precomputed: everything
// that does not depend on the caller. A corpus reload builds a new Content
// and swaps it in; a request keeps the Content it began with.
type Content struct {
	*corpus.Corpus
	lessons *lessondoc.Set // (lessons) what the lesson, transcript, quiz and media renderings precompute: origin/lessondoc
	rows    listRows       // (lists) precomputed subject and class rows: lists.go
	search  *search.Index  // (search) the search index: origin/search
	prep    prepIndex      // (testprep) precomputed test-prep catalog and items: testprep.go
	openapi *openapi.Doc   // (openapi) the OpenAPI description generated for this corpus: origin/openapi
	// Parts are the version's subject and class digests, which the
	// change feed compares and the database keeps (origin/changes).
	Parts *changes.Version
}

// Build precomputes c for serving.
func Build(c *corpus.Corpus) (*Content, error) {
	ct := &Content{Corpus: c}
	lessons, err := lessondoc.Build(c) // (lessons) build
	if err != nil {
		return nil, err
	}
	ct.lessons = lessons
	ct.rows = buildListRows(c)    // (lists) build
	ct.search = search.Build(c)   // (search) build
	ct.prep = buildPrep(c)        // (testprep) build
	ct.openapi = openapi.Build(c) // (openapi) build
	ct.Parts = changes.Of(c)      // (changes) build
	return ct, nil
}
