package export

import (
	"archive/zip"
	"io"
	"sync"

	"github.com/klauspost/compress/flate"
)

// zipLevel is the zip entries' deflate level: fast, as a download is
// built on every request (klauspost's level 5 against the standard
// library's 6: a few percent larger, about twice as fast).
const zipLevel = 5

// Result is what a written bundle reports.
type Result struct {
	// Classes is the number of classes shipped: the export result's
	// classes and the downloads billed.
	Classes int
	// Bytes is the number of bytes written to the writer.
	Bytes int64
}

// WriteZip streams req's bundle to w as a zip (application/zip): each
// file is rendered, deflated and written before the next is made, so
// memory holds one file, not the bundle. Entries carry a fixed time and
// come in the bundle's order, so the same request writes the same bytes.
// An error from w stops the build and is returned.
func (b *Builder) WriteZip(w io.Writer, req Request) (Result, error) {
	cw := &countWriter{w: w}
	zw := zip.NewWriter(cw)
	zw.RegisterCompressor(zip.Deflate, deflater)
	err := b.walk(req, func(name string, data []byte) error {
		f, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate, Modified: modTime})
		if err != nil {
			return err
		}
		_, err = f.Write(data)
		return err
	})
	if err == nil {
		err = zw.Close()
	}
	return Result{Classes: req.Target.Classes(), Bytes: cw.n}, err
}

// countWriter counts what it passes on.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// flaters recycles deflate compressors (each holds about a megabyte of
// state).
var flaters sync.Pool

// deflater is the zip writers' compressor: a pooled klauspost deflater,
// returned to the pool when its entry closes.
func deflater(w io.Writer) (io.WriteCloser, error) {
	if f, ok := flaters.Get().(*flate.Writer); ok {
		f.Reset(w)
		return pooledFlate{f}, nil
	}
	f, err := flate.NewWriter(w, zipLevel)
	if err != nil {
		return nil, err
	}
	return pooledFlate{f}, nil
}

type pooledFlate struct{ *flate.Writer }

func (p pooledFlate) Close() error {
	err := p.Writer.Close()
	flaters.Put(p.Writer)
	return err
}
