package export

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/corpus"
)

func zipBytes(t testing.TB, b *Builder, req Request) []byte {
	t.Helper()
	var buf bytes.Buffer
	res, err := b.WriteZip(&buf, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Bytes != int64(buf.Len()) || res.Classes != req.Target.Classes() {
		t.Errorf("WriteZip result %+v; wrote %d bytes of %d classes", res, buf.Len(), req.Target.Classes())
	}
	return buf.Bytes()
}

// TestZip: archive/zip reads the bundle's files back, in order, each with
// the fixed time; the same request writes the same bytes from any
// builder.
func TestZip(t *testing.T) {
	c, _ := smallCorpus(t)
	req := request("acme", Target{Subject: biggest(c)})
	b := newBuilder(t)
	z := zipBytes(t, b, req)
	if !bytes.Equal(z, zipBytes(t, b, req)) || !bytes.Equal(z, zipBytes(t, newBuilder(t), req)) {
		t.Error("two builds of one request differ")
	}
	zr, err := zip.NewReader(bytes.NewReader(z), int64(len(z)))
	if err != nil {
		t.Fatal(err)
	}
	want := files(t, b, req)
	if len(zr.File) != len(want) {
		t.Fatalf("zip has %d entries, want %d", len(zr.File), len(want))
	}
	for i, f := range zr.File {
		if f.Name != want[i].name || !f.Modified.Equal(modTime) {
			t.Errorf("entry %d: %s at %v, want %s at %v", i, f.Name, f.Modified, want[i].name, modTime)
		}
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		if !bytes.Equal(got, want[i].data) {
			t.Errorf("%s: the zip's bytes differ from the bundle's", f.Name)
		}
	}
	if other := zipBytes(t, b, request("globex", req.Target)); bytes.Equal(other, z) {
		t.Error("two organisations get the same zip")
	}
}

// failWriter fails after n bytes.
type failWriter struct{ n int }

var errWrite = errors.New("the client went away")

func (f *failWriter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		n := f.n
		f.n = 0
		return n, errWrite
	}
	f.n -= len(p)
	return len(p), nil
}

// TestZipWriterFails: a writer's error stops the build and comes back.
func TestZipWriterFails(t *testing.T) {
	c, _ := smallCorpus(t)
	for _, n := range []int{0, 100, 10_000} {
		_, err := newBuilder(t).WriteZip(&failWriter{n: n}, request("acme", Target{Subject: biggest(c)}))
		if !errors.Is(err, errWrite) {
			t.Errorf("after %d bytes: err %v, want the writer's", n, err)
		}
	}
}

// TestConcurrentBuilds: one builder serves concurrent downloads (its
// pooled scratch and compressors shared), each writing its own bytes.
func TestConcurrentBuilds(t *testing.T) {
	c, _ := smallCorpus(t)
	b := newBuilder(t)
	orgs := []string{"acme", "globex", "initech", "umbrella"}
	want := map[string][]byte{}
	for _, org := range orgs {
		want[org] = zipBytes(t, newBuilder(t), request(org, Target{Subject: biggest(c)}))
	}
	var wg sync.WaitGroup
	for i := range 16 {
		org := orgs[i%len(orgs)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf bytes.Buffer
			if i%2 == 0 {
				if _, err := b.WriteZip(&buf, request(org, Target{Subject: biggest(c)})); err != nil {
					t.Error(err)
				} else if !bytes.Equal(buf.Bytes(), want[org]) {
					t.Errorf("%s: a concurrent build differs", org)
				}
				return
			}
			if _, err := b.WriteInline(&buf, request(org, Target{Subject: biggest(c)}), 0); err != nil {
				t.Error(err)
			}
			if _, ok := b.TranscriptLesson([]byte("## nothing")); ok {
				t.Error("a transcript found for nothing")
			}
		}()
	}
	wg.Wait()
}

// withHelpers is a builder whose zips take up to n helper goroutines.
func withHelpers(t testing.TB, n int) *Builder {
	b := newBuilder(t)
	b.helpers = make(chan struct{}, n)
	return b
}

// slowWriter yields to the other goroutines at every 512 bytes it
// takes, so the helpers run ahead of the writer as far as they may.
type slowWriter struct{ bytes.Buffer }

func (s *slowWriter) Write(p []byte) (int, error) {
	for i := 0; i < len(p); i += 512 {
		runtime.Gosched()
		s.Buffer.Write(p[i:min(len(p), i+512)])
	}
	return len(p), nil
}

// TestZipHelpersSameBytes: a zip whose classes helpers make ahead of the
// writer is byte for byte the one the writer makes alone, for a subject,
// a class and a one-class subject, with one helper or more than the
// classes, and onto a writer slower than the helpers.
func TestZipHelpersSameBytes(t *testing.T) {
	c, _ := smallCorpus(t)
	sub := biggest(c)
	var one *corpus.Subject
	for _, s := range c.Subjects {
		if len(s.Lessons) == 1 {
			one = s
		}
	}
	targets := []Target{{Subject: sub}, {Subject: sub, Class: 2}}
	if one != nil {
		targets = append(targets, Target{Subject: one})
	}
	for _, target := range targets {
		req := request("acme", target)
		want := zipBytes(t, withHelpers(t, 0), req)
		for _, n := range []int{1, 3, 64} {
			b := withHelpers(t, n)
			if got := zipBytes(t, b, req); !bytes.Equal(got, want) {
				t.Errorf("%s class %d, %d helpers: the zip differs from the writer's alone", target.Subject.Ref(), target.Class, n)
			}
			var slow slowWriter
			if _, err := b.WriteZip(io.Writer(&slow), req); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(slow.Bytes(), want) {
				t.Errorf("%s class %d, %d helpers, a slow writer: the zip differs", target.Subject.Ref(), target.Class, n)
			}
			if len(b.helpers) != 0 {
				t.Errorf("%d helper tokens held after the zip", len(b.helpers))
			}
		}
	}
}

// TestZipHelpersWriterFails: with helpers, a writer's error stops the
// build, comes back, and leaves no helper running (their tokens given
// back); an encoding of the bundle that the error cut short leaks
// nothing into the next zip.
func TestZipHelpersWriterFails(t *testing.T) {
	c, _ := smallCorpus(t)
	req := request("acme", Target{Subject: biggest(c)})
	b := withHelpers(t, 2)
	want := zipBytes(t, b, req)
	for _, n := range []int{0, 100, 10_000, len(want) / 2} {
		if _, err := b.WriteZip(&failWriter{n: n}, req); !errors.Is(err, errWrite) {
			t.Errorf("after %d bytes: err %v, want the writer's", n, err)
		}
		if len(b.helpers) != 0 {
			t.Errorf("after %d bytes: %d helper tokens held", n, len(b.helpers))
		}
		if got := zipBytes(t, b, req); !bytes.Equal(got, want) {
			t.Errorf("after a failure at %d bytes the next zip differs", n)
		}
	}
}

// TestZipEntries: every entry of the zip reads back with its CRC-32
// checked, dated as zip.Writer.CreateHeader dates modTime (MS-DOS date
// and time, extended timestamp), and the manifest in the zip lists each
// other entry's size and SHA-256 as read back.
func TestZipEntries(t *testing.T) {
	c, _ := smallCorpus(t)
	z := zipBytes(t, withHelpers(t, 1), request("acme", Target{Subject: biggest(c)}))
	zr, err := zip.NewReader(bytes.NewReader(z), int64(len(z)))
	if err != nil {
		t.Fatal(err)
	}
	var ref bytes.Buffer
	rw := zip.NewWriter(&ref)
	if _, err := rw.CreateHeader(&zip.FileHeader{Name: "x", Method: zip.Deflate, Modified: modTime}); err != nil {
		t.Fatal(err)
	}
	rw.Close()
	rr, err := zip.NewReader(bytes.NewReader(ref.Bytes()), int64(ref.Len()))
	if err != nil {
		t.Fatal(err)
	}
	wantHead := rr.File[0].FileHeader
	read := map[string][]byte{}
	var names []string
	for _, f := range zr.File {
		h := f.FileHeader
		if h.ModifiedDate != wantHead.ModifiedDate || h.ModifiedTime != wantHead.ModifiedTime || !bytes.Equal(h.Extra, wantHead.Extra) ||
			!h.Modified.Equal(modTime) || h.ReaderVersion != wantHead.ReaderVersion || h.CreatorVersion != wantHead.CreatorVersion || h.Method != zip.Deflate {
			t.Errorf("%s: header %+v, want the date and versions of %+v", f.Name, h, wantHead)
		}
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(rc) // checks the CRC-32 and size at EOF
		rc.Close()
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		read[f.Name] = data
		names = append(names, f.Name)
	}
	var m struct {
		Files []file `json:"files"`
	}
	if err := json.Unmarshal(read["manifest.json"], &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Files) != len(names)-1 {
		t.Fatalf("the manifest lists %d files, the zip has %d besides it", len(m.Files), len(names)-1)
	}
	for i, f := range m.Files {
		sum := sha256.Sum256(read[names[i]])
		if f.Name != names[i] || f.Bytes != len(read[names[i]]) || f.SHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("manifest file %d %+v; the zip's entry %s: %d bytes, sha256 %x", i, f, names[i], len(read[names[i]]), sum)
		}
	}
}

// gateWriter blocks its first write until open is closed.
type gateWriter struct {
	bytes.Buffer
	open    chan struct{}
	blocked chan struct{}
	once    sync.Once
}

func (g *gateWriter) Write(p []byte) (int, error) {
	g.once.Do(func() { close(g.blocked); <-g.open })
	return g.Buffer.Write(p)
}

// TestZipStalledWriterFreesHelper: while a download's writer is stalled
// (a client that does not read), its helper, once every slot ahead is
// taken, gives its token back for other downloads; the zip, once the
// writer goes on, is the writer's-alone bytes.
func TestZipStalledWriterFreesHelper(t *testing.T) {
	c, _ := smallCorpus(t)
	req := request("acme", Target{Subject: biggest(c)})
	if n := req.Target.Classes(); n < 2*aheadPerWorker+2 {
		t.Fatalf("the subject has %d classes, too few to fill the slots", n)
	}
	want := zipBytes(t, withHelpers(t, 0), req)
	b := withHelpers(t, 1)
	g := &gateWriter{open: make(chan struct{}), blocked: make(chan struct{})}
	done := make(chan error)
	go func() { _, err := b.WriteZip(g, req); done <- err }()
	<-g.blocked
	// The helper fills the slots, then gives its token back: wait for it
	// (a liveness check; the deadline only bounds a failure).
	for deadline := time.Now().Add(20 * time.Second); len(b.helpers) != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			close(g.open)
			<-done
			t.Fatal("the helper of a stalled download kept its token")
		}
	}
	close(g.open)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(g.Bytes(), want) {
		t.Error("the stalled download's zip differs from the writer's alone")
	}
}
