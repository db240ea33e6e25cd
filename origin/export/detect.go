package export

import (
	"bytes"
	"crypto/sha256"
	"sync"
)

// transcripts indexes the corpus's transcripts by their words, for
// TranscriptLesson; built on first use.
type transcripts struct {
	once  sync.Once
	index map[[32]byte]string
}

// spaceless is the hash of md without its spaces: the same for every
// organisation's copy, as canaries only change spaces.
func spaceless(md []byte) [32]byte {
	return sha256.Sum256(bytes.ReplaceAll(md, []byte{' '}, nil))
}

// TranscriptLesson names the lesson whose transcript markdown md is, an
// organisation's marked copy or not (forensic.Detector's
// TranscriptLesson: a transcript found alone does not name its lesson).
// The first call renders every transcript of the corpus once.
func (b *Builder) TranscriptLesson(md []byte) (string, bool) {
	t := &b.transcripts
	t.once.Do(func() {
		t.index = map[[32]byte]string{}
		var buf []byte
		for _, l := range b.corpus.Lessons {
			if l.HasTranscript {
				buf = b.docs.Doc(l).AppendMarkdown(buf[:0])
				t.index[spaceless(buf)] = l.ID
			}
		}
	})
	id, ok := t.index[spaceless(md)]
	return id, ok
}
