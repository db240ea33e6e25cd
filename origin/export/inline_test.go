package export

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"io"
	"testing"
)

func inlineBytes(t testing.TB, b *Builder, req Request, limit int64) ([]byte, error) {
	t.Helper()
	var buf bytes.Buffer
	res, err := b.WriteInline(&buf, req, limit)
	if res.Bytes != int64(buf.Len()) || res.Classes != req.Target.Classes() {
		t.Errorf("WriteInline result %+v; wrote %d bytes of %d classes", res, buf.Len(), req.Target.Classes())
	}
	return buf.Bytes(), err
}

// TestInline: the data is standard base64 of a gzip of a tar holding the
// bundle's files in order with the fixed time (what the zip holds), the
// same bytes from any builder.
func TestInline(t *testing.T) {
	c, _ := smallCorpus(t)
	req := request("acme", Target{Subject: biggest(c)})
	b := newBuilder(t)
	data, err := inlineBytes(t, b, req, 0)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := inlineBytes(t, newBuilder(t), req, 0)
	if !bytes.Equal(data, again) {
		t.Error("two builds of one request differ")
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(string(data))
	if err != nil {
		t.Fatalf("data is not standard base64: %v", err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	zr.Multistream(false)
	tr := tar.NewReader(zr)
	want := files(t, b, req)
	for i := 0; ; i++ {
		h, err := tr.Next()
		if err == io.EOF {
			if i != len(want) {
				t.Errorf("tar has %d files, want %d", i, len(want))
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if i >= len(want) {
			t.Fatalf("tar has more than %d files", len(want))
		}
		got, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if h.Name != want[i].name || !h.ModTime.Equal(modTime) || h.Typeflag != tar.TypeReg || !bytes.Equal(got, want[i].data) {
			t.Errorf("tar file %d: %s at %v differs from the bundle's %s", i, h.Name, h.ModTime, want[i].name)
		}
	}
	if rest, _ := io.ReadAll(zr); len(rest) != 0 {
		t.Errorf("%d bytes after the tar", len(rest))
	}
}

// TestInlineLimit: the data passes a limit it fits and stops with
// ErrTooLarge, having written no more than the limit, at one it does not.
func TestInlineLimit(t *testing.T) {
	c, _ := smallCorpus(t)
	req := request("acme", Target{Subject: biggest(c)})
	b := newBuilder(t)
	whole, err := inlineBytes(t, b, req, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := int64(len(whole))
	if got, err := inlineBytes(t, b, req, n); err != nil || !bytes.Equal(got, whole) {
		t.Errorf("at a limit of its size: err %v, %d bytes", err, len(got))
	}
	for _, limit := range []int64{n - 1, n / 2, 100} {
		got, err := inlineBytes(t, b, req, limit)
		if !errors.Is(err, ErrTooLarge) || int64(len(got)) > limit {
			t.Errorf("limit %d of %d: err %v after %d bytes, want ErrTooLarge within the limit", limit, n, err, len(got))
		}
	}
}
