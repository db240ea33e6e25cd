package export

import (
	"archive/tar"
	"encoding/base64"
	"errors"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
)

// ErrTooLarge is returned by WriteInline when the data would pass its
// limit (the route's 413 PAYLOAD_TOO_LARGE).
var ErrTooLarge = errors.New("export: the inline bundle is larger than the limit")

// WriteInline streams req's bundle in the inline form (spec: Export
// result, format=inline): the standard base64 of the gzip of a tar of the
// zip's files (fixed times, the bundle's order), the value of the result's
// data without its quotes. Base64's alphabet needs no JSON escaping, so w
// may be the body itself.
//
// limit bounds what is written: once the data would pass limit bytes the
// build stops and WriteInline returns ErrTooLarge, having written at most
// limit bytes, which the caller discards. A route that must answer 413
// before its first byte writes into a buffer with limit set to its
// ceiling less the rest of the body: memory stays bounded by the ceiling,
// and a subject too large is refused as soon as it is known. limit <= 0
// means no limit.
func (b *Builder) WriteInline(w io.Writer, req Request, limit int64) (Result, error) {
	lw := &countWriter{w: w, limit: limit}
	enc := base64.NewEncoder(base64.StdEncoding, lw)
	zw := getGzip(enc)
	defer gzips.Put(zw)
	tw := tar.NewWriter(zw)
	err := b.walk(req, func(name string, data []byte) error {
		err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: int64(len(data)),
			Mode: 0o644, ModTime: modTime, Format: tar.FormatUSTAR})
		if err == nil {
			_, err = tw.Write(data)
		}
		return err
	})
	for _, c := range []io.Closer{tw, zw, enc} {
		if err != nil {
			break
		}
		err = c.Close()
	}
	return Result{Classes: req.Target.Classes(), Bytes: lw.n}, err
}

// gzips recycles gzip writers, which hold a deflater's state.
var gzips sync.Pool

// inlineLevel is the inline form's gzip level: klauspost's level 5. One
// stream over the whole tar gains more from matching than the zip's small
// entries do (level 1 makes a 30-class subject's data a third larger,
// 255 KB against 192 KB), and the data is base64 in a JSON body under the
// route's size ceiling.
const inlineLevel = 5

// getGzip is a pooled gzip writer onto w, at inlineLevel; its header has
// no name, time or OS, so the same bytes give the same member.
func getGzip(w io.Writer) *gzip.Writer {
	if zw, ok := gzips.Get().(*gzip.Writer); ok {
		zw.Reset(w)
		return zw
	}
	zw, _ := gzip.NewWriterLevel(w, inlineLevel) // the level is valid
	return zw
}
