package export

import (
	"archive/zip"
	"bytes"
	"errors"
	"io"
	"sync"
	"testing"
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
