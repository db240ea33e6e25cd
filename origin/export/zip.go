package export

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/binary"
	"hash/crc32"
	"io"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/flate"
	"github.com/lectern-api/lectern/origin/corpus"
)

// zipLevel is the zip entries' deflate level: the fastest with
// matching, as a download is built on every request. On a 30-class
// subject (1.4 MB of files) klauspost's level 1 takes about two thirds of
// the CPU time of its level 5 (4.8 ms against 7.2 ms) for 11% more bytes
// (257 KB against 231 KB); levels 2 to 4 are slower than 1 and hardly
// smaller. The inline form keeps its own level (inlineLevel).
const zipLevel = 1

// Result is what a written bundle reports.
type Result struct {
	// Classes is the number of classes shipped: the export result's
	// classes and the downloads billed.
	Classes int
	// Bytes is the number of bytes written to the writer.
	Bytes int64
}

// WriteZip streams req's bundle to w as a zip (application/zip). Each
// class's files are rendered, hashed and deflated on their own (every
// entry is compressed independently) and written in the bundle's order
// with their sizes and CRC-32 in the entry's header (zip.Writer.CreateRaw,
// no data descriptor). When a core is idle (Builder.helpers) a helper
// goroutine renders and deflates the classes ahead of the writer, on the
// other core; at most a few classes are held, deflated, ahead of what w
// has taken, so memory holds a few files, never the bundle, whatever the
// speed of w. Which goroutine deflates an entry does not change its
// bytes, and entries carry a fixed time, so the same request writes the
// same bytes. An error from w stops the build and is returned.
func (b *Builder) WriteZip(w io.Writer, req Request) (Result, error) {
	lessons := req.Target.Lessons()
	if len(lessons) == 0 {
		return Result{}, ErrNoClass
	}
	cw := &countWriter{w: w}
	zw := zip.NewWriter(cw)
	m := b.newManifest(req, lessons)
	p := b.startClasses(req, lessons)
	defer p.stop()
	zf := p.zf
	emit := func(name string, data []byte) error {
		f := zf.deflate(name, data)
		err := f.writeTo(zw)
		zf.release()
		return err
	}
	put := func(name string, data []byte) error {
		m.add(name, len(data), sha256.Sum256(data))
		return emit(name, data)
	}
	err := p.each(func(l *corpus.Lesson, u *classUnit) error {
		m.addClass(l)
		for i := range u.n {
			f := &u.files[i]
			m.add(f.name, f.size, f.sum)
			if err := f.writeTo(zw); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		err = b.finish(p.w, req, lessons, m, put, emit)
	}
	if err == nil {
		err = zw.Close()
	}
	return Result{Classes: len(lessons), Bytes: cw.n}, err
}

// zipFile is a file deflated for the zip: its compressed bytes and what
// its header and the manifest say of it.
type zipFile struct {
	name string
	size int
	sum  [sha256.Size]byte
	crc  uint32
	z    []byte
}

// writeTo writes f as the next entry of zw.
func (f *zipFile) writeTo(zw *zip.Writer) error {
	fh := &zip.FileHeader{Name: f.name, Method: zip.Deflate,
		CreatorVersion: zipVersion20, ReaderVersion: zipVersion20,
		ModifiedDate: modDate, ModifiedTime: modClock, Extra: modExtra,
		CRC32: f.crc, CompressedSize64: uint64(len(f.z)), UncompressedSize64: uint64(f.size)}
	fw, err := zw.CreateRaw(fh)
	if err == nil {
		_, err = fw.Write(f.z)
	}
	return err
}

// zipVersion20 is the zip version an entry needs and is made by: 2.0,
// deflate (as zip.Writer.CreateHeader sets them).
const zipVersion20 = 20

// The fixed time of every entry (modTime), as zip.Writer.CreateHeader
// records a FileHeader's Modified: the MS-DOS date and time, and the
// extended timestamp extra field (0x5455, 5 bytes: flags ModTime, then
// the Unix time, little-endian).
var (
	modDate  = uint16((modTime.Year()-1980)<<9 | int(modTime.Month())<<5 | modTime.Day())
	modClock = uint16(modTime.Hour()<<11 | modTime.Minute()<<5 | modTime.Second()/2)
	modExtra = binary.LittleEndian.AppendUint32([]byte{0x55, 0x54, 5, 0, 1}, uint32(modTime.Unix()))
)

// zipper deflates files into one growing buffer with one compressor.
type zipper struct {
	fw  *flate.Writer
	buf appendWriter
}

// deflate is data deflated as the file name. Its bytes live in z's buffer
// until release.
func (z *zipper) deflate(name string, data []byte) zipFile {
	if z.fw == nil {
		z.fw = getFlate(&z.buf)
	} else {
		z.fw.Reset(&z.buf)
	}
	from := len(z.buf.b)
	z.fw.Write(data) // an appendWriter never fails
	z.fw.Close()
	return zipFile{name: name, size: len(data), sum: sha256.Sum256(data), crc: crc32.ChecksumIEEE(data),
		z: z.buf.b[from:len(z.buf.b):len(z.buf.b)]}
}

// release empties the buffer: the files deflated are dead.
func (z *zipper) release() { z.buf.b = z.buf.b[:0] }

// done gives the compressor back.
func (z *zipper) done() {
	if z.fw != nil {
		flaters.Put(z.fw)
		z.fw = nil
	}
}

// appendWriter appends what is written to b.
type appendWriter struct{ b []byte }

func (a *appendWriter) Write(p []byte) (int, error) {
	a.b = append(a.b, p...)
	return len(p), nil
}

// classUnit is one class's files, deflated: the class file and, when the
// class has one, the transcript.
type classUnit struct {
	done  chan struct{} // closed when files are set
	files [2]zipFile
	n     int
	buf   []byte // the files' compressed bytes; from units
}

// units recycles the classes' compressed bytes.
var units sync.Pool // *[]byte

// classes renders and deflates the classes of one zip, in order, on the
// writer's goroutine and, when a core is idle, on a helper's.
type classes struct {
	b       *Builder
	req     Request
	lessons []*corpus.Lesson
	units   []classUnit
	next    atomic.Int64  // the next class to claim
	slots   chan struct{} // one per class claimed and not yet written
	quit    chan struct{} // closed when the writer stops
	helpers sync.WaitGroup
	w       *work   // the writer's scratch
	zf      *zipper // the writer's compressor, for the files after the classes
}

// aheadPerWorker bounds the classes held deflated ahead of the writer,
// per goroutine rendering them.
const aheadPerWorker = 2

// startClasses starts the classes of lessons: one helper per token free
// in b.helpers (none while other downloads hold them all, as under many
// concurrent downloads), each with its own scratch and compressor.
func (b *Builder) startClasses(req Request, lessons []*corpus.Lesson) *classes {
	p := &classes{b: b, req: req, lessons: lessons, units: make([]classUnit, len(lessons)),
		quit: make(chan struct{}), w: b.getWork(), zf: &zipper{}}
	for i := range p.units {
		p.units[i].done = make(chan struct{})
	}
	tokens := 0
take:
	for tokens < len(lessons)-1 {
		select {
		case b.helpers <- struct{}{}:
			tokens++
		default:
			break take
		}
	}
	p.slots = make(chan struct{}, aheadPerWorker*(tokens+1))
	for range tokens {
		p.helpers.Add(1)
		go p.help()
	}
	return p
}

// help makes classes ahead of the writer, holding a token of b.helpers
// while it works. When the writer is behind (every slot taken: a slow
// client) it gives its token back while it waits, so that a stalled
// download does not keep other downloads off the idle core; once a slot
// frees it makes that class, and goes on only if a token is free again.
func (p *classes) help() {
	defer p.helpers.Done()
	held := true
	defer func() {
		if held {
			<-p.b.helpers
		}
	}()
	w, z := p.b.getWork(), &zipper{}
	defer func() { p.b.putWork(w); z.done() }()
	for {
		i, ok := p.claim(false)
		if !ok {
			if p.next.Load() >= int64(len(p.units)) {
				return // every class is claimed
			}
			<-p.b.helpers
			held = false
			if i, ok = p.claim(true); !ok {
				return
			}
		}
		p.build(w, z, i)
		if !held {
			select {
			case p.b.helpers <- struct{}{}:
				held = true
			default:
				return // another download has the core
			}
		}
	}
}

// claim takes the next class to make, waiting for a slot when wait is
// set, else only if one is free; false when every class is claimed, the
// writer stopped, or (without wait) no slot is free.
func (p *classes) claim(wait bool) (int, bool) {
	if wait {
		select {
		case <-p.quit:
			return 0, false
		case p.slots <- struct{}{}:
		}
	} else {
		select {
		case p.slots <- struct{}{}:
		default:
			return 0, false
		}
	}
	i := int(p.next.Add(1) - 1)
	if i >= len(p.units) {
		<-p.slots
		return 0, false
	}
	return i, true
}

// build renders and deflates class i into its unit.
func (p *classes) build(w *work, z *zipper, i int) {
	u := &p.units[i]
	defer close(u.done)
	l := p.lessons[i]
	class, transcript := p.b.classFiles(w, p.req, l)
	if bp, ok := units.Get().(*[]byte); ok {
		z.buf.b = (*bp)[:0]
	}
	u.files[0] = z.deflate(classFileName(l, false), class)
	u.n = 1
	if transcript != nil {
		u.files[1] = z.deflate(classFileName(l, true), transcript)
		u.n = 2
	}
	u.buf, z.buf.b = z.buf.b, nil
}

// each gives the classes to write in order, making those no helper has
// claimed; it returns the first error of write.
func (p *classes) each(write func(*corpus.Lesson, *classUnit) error) error {
	for i := range p.units {
		u := &p.units[i]
	wait:
		for {
			select {
			case <-u.done:
				break wait
			default:
			}
			// Class i is claimed (the claims go in order, and a slot is
			// taken by a class not yet written, the oldest being i): make
			// one ahead while its maker works, else wait for it.
			if j, ok := p.claim(false); ok {
				p.build(p.w, p.zf, j)
				continue
			}
			<-u.done
		}
		err := write(p.lessons[i], u)
		if cap(u.buf) <= 1<<20 {
			b := u.buf[:0]
			units.Put(&b)
		}
		u.buf, u.files = nil, [2]zipFile{}
		<-p.slots
		if err != nil {
			return err
		}
	}
	return nil
}

// stop ends the helpers and gives back the writer's scratch.
func (p *classes) stop() {
	close(p.quit)
	p.helpers.Wait()
	p.b.putWork(p.w)
	p.zf.done()
}

// countWriter counts what it passes on: Result.Bytes of both forms. With
// a limit > 0 (WriteInline's) it passes at most limit bytes on, then
// fails with ErrTooLarge.
type countWriter struct {
	w     io.Writer
	limit int64
	n     int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	if c.limit > 0 && c.n+int64(len(p)) > c.limit {
		return 0, ErrTooLarge
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// flaters recycles deflate compressors (each holds about a megabyte of
// state).
var flaters sync.Pool

// getFlate is a pooled klauspost deflater at zipLevel onto w. getGzip
// (inline.go) is its twin for the inline form: another type at another
// level, in a pool of its own, so each stays a few plain lines.
func getFlate(w io.Writer) *flate.Writer {
	if f, ok := flaters.Get().(*flate.Writer); ok {
		f.Reset(w)
		return f
	}
	f, _ := flate.NewWriter(w, zipLevel) // the level is valid
	return f
}
