package server

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/shared/etag"
	"github.com/lectern-api/lectern/shared/link"
)

// serveFile serves a signed download link (shared/link) under
// link.Prefix: GET or HEAD, no token, nothing metered, valid while the
// stack's clock is before its expiry. A media link's asset is the file at
// its location under the corpus directory when there is one, else
// deterministic bytes of its declared size (synthetic); either with its
// MIME type, a strong ETag, byte ranges as http.ServeContent answers them,
// and Content-Disposition naming the link's file name. A link that is
// expired, altered, of an unknown key, or of a media id the corpus being
// served does not hold is 404 NOT_FOUND (link.Refusal); one whose
// organisation may no longer read the asset's subject is refused as
// downloads.go says. An export link's zip is serveExportLink's
// (exports.go).
func (s *Server) serveFile(w http.ResponseWriter, r *http.Request, id string) {
	l, e := s.cfg.URLKeys.Check(r.Method, r.URL.EscapedPath(), r.URL.RawQuery, s.cfg.Now())
	if e != nil {
		s.writeError(w, r, id, e)
		return
	}
	ct := s.cfg.Content()
	if l.Kind == link.Export {
		s.serveExportLink(w, r, id, l, ct)
		return
	}
	m := ct.Media(l.Media)
	if m == nil {
		s.writeError(w, r, id, link.Refusal(nil))
		return
	}
	sub := m.Lesson.Subject
	_, release, err := s.startDownload(r.Context(), l, sub.Tier, sub.Slug)
	if err != nil {
		s.writeError(w, r, id, err)
		return
	}
	defer release()
	content, done, err := asset(ct.Dir, m)
	if err != nil {
		s.writeError(w, r, id, err)
		return
	}
	defer done()
	h := w.Header()
	h.Set("Content-Type", m.MIME)
	h.Set("ETag", assetTag(ct.ContentVersion, m))
	attachment(h, l.Name)
	http.ServeContent(w, r, l.Name, time.Time{}, content)
}

// publicLink is l signed with the first URL key, absolute on the API's
// public base URL (LECTERN_PUBLIC_URL, the resource identifier): what a
// mint or an export answers.
func (s *Server) publicLink(l link.Link) string {
	return strings.TrimSuffix(s.cfg.Resource, "/") + s.cfg.URLKeys.Sign(l)
}

// assetTag is an asset's strong ETag: its bytes are a function of the
// corpus version and the media id (a corpus is immutable under one
// version; the synthetic bytes depend on the id and size alone), so one
// tag names one sequence of bytes and may validate a range (RFC 9110
// §13.1.5, If-Range needs a strong validator).
func assetTag(version string, m *corpus.Media) string {
	weak := etag.Derive(etag.Input{Version: version, Target: m.ID, Params: strconv.FormatInt(m.Bytes, 10)})
	return strings.TrimPrefix(weak, "W/")
}

// asset opens m's bytes: <dir>/<location> when that is a regular file
// (opened within dir: a location cannot leave it), else, when there is no
// such file, synthetic bytes of its declared size. A file that is there
// but cannot be read is an error (500), not a stand-in.
func asset(dir string, m *corpus.Media) (io.ReadSeeker, func() error, error) {
	f, err := os.OpenInRoot(dir, m.Location)
	switch {
	case err == nil:
		if st, serr := f.Stat(); serr == nil && st.Mode().IsRegular() {
			return f, f.Close, nil
		}
		f.Close()
	case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR):
		return nil, nil, err
	}
	return newSynthetic(m.ID, m.Bytes), func() error { return nil }, nil
}

// synthetic is an asset's stand-in when the corpus holds only its record:
// size bytes of AES-CTR keystream keyed by the media id, so the same id
// always reads the same bytes, any range is read without the bytes
// before it, and nothing is held but the cipher.
type synthetic struct {
	block  cipher.Block
	size   int64
	off    int64
	stream cipher.Stream // at offset streamAt
	at     int64
}

func newSynthetic(mediaID string, size int64) *synthetic {
	key := sha256.Sum256([]byte("lectern/asset/v1\x00" + mediaID))
	block, _ := aes.NewCipher(key[:16]) // a 16-byte key never fails
	return &synthetic{block: block, size: size}
}

func (s *synthetic) Read(p []byte) (int, error) {
	if s.off >= s.size {
		return 0, io.EOF
	}
	if rest := s.size - s.off; int64(len(p)) > rest {
		p = p[:rest]
	}
	if s.stream == nil || s.at != s.off {
		var iv [aes.BlockSize]byte
		binary.BigEndian.PutUint64(iv[8:], uint64(s.off/aes.BlockSize))
		s.stream = cipher.NewCTR(s.block, iv[:])
		var skip [aes.BlockSize]byte
		n := s.off % aes.BlockSize
		s.stream.XORKeyStream(skip[:n], skip[:n])
	}
	clear(p)
	s.stream.XORKeyStream(p, p)
	s.off += int64(len(p))
	s.at = s.off
	return len(p), nil
}

func (s *synthetic) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += s.off
	case io.SeekEnd:
		offset += s.size
	default:
		return 0, errors.New("synthetic asset: bad whence")
	}
	if offset < 0 {
		return 0, errors.New("synthetic asset: negative position")
	}
	s.off = offset
	return offset, nil
}
