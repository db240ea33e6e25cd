package server

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/licence"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/shared/apierr"
	shid "github.com/lectern-api/lectern/shared/id"
	"github.com/lectern-api/lectern/shared/link"
)

const filesKeys = "k1=files-test-key-one-0123456789abcdef,k0=files-test-key-zero-0123456789abcdef"

// filesHarness is an origin serving only what a download needs: the
// corpus, the clock (a test moves it), the URL keys, and the store and
// meters a download reads its organisation from (filesOrg, granted every
// tier). No authenticator: a download uses none, and one that tried would
// panic the test.
type filesHarness struct {
	*harness
	srv   *Server
	keys  link.Keys
	clock *atomic.Int64 // unix nanoseconds
	org   *store.Org    // filesOrg as created
}

// filesOrg is the organisation the files harness signs its links for.
const filesOrg = "acme"

func newFilesHarness(t *testing.T, ct *Content) *filesHarness {
	t.Helper()
	keys, err := link.ParseKeys(filesKeys)
	if err != nil {
		t.Fatal(err)
	}
	fh := &filesHarness{keys: keys, clock: new(atomic.Int64)}
	fh.clock.Store(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC).UnixNano())
	content := new(atomic.Pointer[Content])
	content.Store(ct)
	ctx := context.Background()
	st, ms := openStores(t, t.TempDir())
	o := licence.NewOrg(fh.now())
	o.ID, o.Name, o.Grants = filesOrg, "Acme", slices.Clone(shid.Tiers)
	if err := st.CreateOrg(ctx, o); err != nil {
		t.Fatal(err)
	}
	if fh.org, err = st.GetOrg(ctx, filesOrg); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(nil)
	base := "http://" + srv.Listener.Addr().String()
	fh.srv = New(Config{
		Content:  content.Load,
		Now:      func() time.Time { return time.Unix(0, fh.clock.Load()) },
		URLKeys:  keys,
		Resource: base + "/",
		Store:    st,
		Meters:   ms,
	})
	srv.Config.Handler = fh.srv
	srv.Start()
	t.Cleanup(srv.Close)
	tr := &http.Transport{DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	fh.harness = &harness{t: t, api: base, content: content, client: &http.Client{Transport: tr}, store: st, meters: ms}
	return fh
}

func (fh *filesHarness) now() time.Time { return time.Unix(0, fh.clock.Load()) }

// mediaLink signs a link to mediaID valid for ttl from now, as a mint
// would (publicLink), and returns its path and query.
func (fh *filesHarness) mediaLink(mediaID string, ttl time.Duration) string {
	u := fh.srv.publicLink(link.Link{Kind: link.Media, Expires: fh.now().Add(ttl).Unix(), Row: 7, Name: "asset.bin", Media: mediaID,
		Org: filesOrg, Gen: fh.org.Generation})
	rest, ok := strings.CutPrefix(u, fh.api+link.Prefix)
	if !ok {
		fh.t.Fatalf("link %q is not under %s%s", u, fh.api, link.Prefix)
	}
	return link.Prefix + rest
}

// someMedia is an asset of the corpus with at least min bytes.
func someMedia(t *testing.T, c *corpus.Corpus, min int64) *corpus.Media {
	t.Helper()
	for _, l := range c.Lessons {
		for _, m := range l.Media {
			if m.Bytes >= min {
				return m
			}
		}
	}
	t.Fatalf("no asset of %d bytes", min)
	return nil
}

func TestFilesServesSyntheticAsset(t *testing.T) {
	fh := newFilesHarness(t, smallContent(t, ""))
	m := someMedia(t, fh.corpus(), 1000)
	u := fh.mediaLink(m.ID, 15*time.Minute)

	r := fh.do("GET", u, "", nil) // no token: the link is the capability
	wantStatus(t, r, 200)
	if int64(len(r.body)) != m.Bytes || r.header.Get("Content-Length") != strconv.FormatInt(m.Bytes, 10) {
		t.Errorf("%d bytes, Content-Length %q; want the declared %d", len(r.body), r.header.Get("Content-Length"), m.Bytes)
	}
	if got := r.header.Get("Content-Type"); got != m.MIME {
		t.Errorf("Content-Type %q, want %q", got, m.MIME)
	}
	tag := r.header.Get("ETag")
	if !strings.HasPrefix(tag, `"`) || r.header.Get("X-Request-Id") == "" || r.header.Get("Accept-Ranges") != "bytes" {
		t.Errorf("ETag %q (want strong), X-Request-Id %q, Accept-Ranges %q", tag, r.header.Get("X-Request-Id"), r.header.Get("Accept-Ranges"))
	}
	want, _ := io.ReadAll(newSynthetic(m.ID, m.Bytes))
	if !bytes.Equal(r.body, want) {
		t.Error("the body is not the asset's synthetic bytes")
	}
	// Deterministic: a second link (another row) reads the same bytes, tag.
	again := fh.do("GET", fh.keys.Sign(link.Link{Kind: link.Media, Expires: fh.now().Add(time.Hour).Unix(), Row: 8, Media: m.ID,
		Org: filesOrg, Gen: fh.org.Generation}), "", nil)
	if !bytes.Equal(again.body, r.body) || again.header.Get("ETag") != tag {
		t.Error("two links to one asset read different bytes or tags")
	}
	other := someMediaOther(t, fh.corpus(), m)
	if o := fh.do("GET", fh.mediaLink(other.ID, time.Hour), "", nil); bytes.Equal(o.body[:64], r.body[:64]) || o.header.Get("ETag") == tag {
		t.Error("two assets share bytes or a tag")
	}

	h := fh.do("HEAD", u, "", nil)
	if h.status != 200 || len(h.body) != 0 || h.header.Get("Content-Length") != strconv.FormatInt(m.Bytes, 10) || h.header.Get("ETag") != tag {
		t.Errorf("HEAD: %d, %d body bytes, Content-Length %q, ETag %q", h.status, len(h.body), h.header.Get("Content-Length"), h.header.Get("ETag"))
	}

	rg := fh.do("GET", u, "", nil, "Range", "bytes=100-199")
	if rg.status != 206 || !bytes.Equal(rg.body, want[100:200]) ||
		rg.header.Get("Content-Range") != "bytes 100-199/"+strconv.FormatInt(m.Bytes, 10) {
		t.Errorf("range: %d, Content-Range %q, %d bytes", rg.status, rg.header.Get("Content-Range"), len(rg.body))
	}
	tail := fh.do("GET", u, "", nil, "Range", "bytes=-10")
	if tail.status != 206 || !bytes.Equal(tail.body, want[len(want)-10:]) {
		t.Errorf("suffix range: %d, %d bytes", tail.status, len(tail.body))
	}
	past := fh.do("GET", u, "", nil, "Range", "bytes="+strconv.FormatInt(m.Bytes, 10)+"-")
	if past.status != 416 || past.header.Get("Content-Range") != "bytes */"+strconv.FormatInt(m.Bytes, 10) {
		t.Errorf("range past the end: %d, Content-Range %q", past.status, past.header.Get("Content-Range"))
	}
	if nm := fh.do("GET", u, "", nil, "If-None-Match", tag); nm.status != 304 || len(nm.body) != 0 {
		t.Errorf("If-None-Match: %d, want 304", nm.status)
	}
	if ir := fh.do("GET", u, "", nil, "Range", "bytes=0-9", "If-Range", `"other"`); ir.status != 200 {
		t.Errorf("If-Range with another tag: %d, want the whole 200", ir.status)
	}
}

func someMediaOther(t *testing.T, c *corpus.Corpus, not *corpus.Media) *corpus.Media {
	t.Helper()
	for _, l := range c.Lessons {
		for _, m := range l.Media {
			if m != not && m.Bytes >= 64 {
				return m
			}
		}
	}
	t.Fatal("one asset only")
	return nil
}

// smallContentIn is the small corpus as if loaded from dir (a copy: the
// shared one is left as it is).
func smallContentIn(t *testing.T, dir string) *Content {
	small := smallContent(t, "")
	c := *small.Corpus
	c.Dir = dir
	ct := *small
	ct.Corpus = &c
	return &ct
}

// An asset whose file is in the corpus directory is served from it.
func TestFilesServesCorpusFile(t *testing.T) {
	ct := smallContentIn(t, t.TempDir())
	c := ct.Corpus
	m := someMedia(t, c, 1)
	data := []byte("the real bytes of " + m.ID)
	path := filepath.Join(c.Dir, filepath.FromSlash(m.Location))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	fh := newFilesHarness(t, ct)
	r := fh.do("GET", fh.mediaLink(m.ID, time.Minute), "", nil)
	if r.status != 200 || !bytes.Equal(r.body, data) || r.header.Get("Content-Type") != m.MIME {
		t.Errorf("got %d %q (%s), want the file's bytes as %s", r.status, r.body, r.header.Get("Content-Type"), m.MIME)
	}
	rg := fh.do("GET", fh.mediaLink(m.ID, time.Minute), "", nil, "Range", "bytes=4-7")
	if rg.status != 206 || !bytes.Equal(rg.body, data[4:8]) {
		t.Errorf("range of the file: %d %q", rg.status, rg.body)
	}
}

// What is refused: 404 NOT_FOUND in the error body, saying to mint or
// export again; other methods 405 with Allow.
func TestFilesRefuses(t *testing.T) {
	fh := newFilesHarness(t, smallContent(t, ""))
	m := someMedia(t, fh.corpus(), 1)
	good := fh.mediaLink(m.ID, time.Minute)
	path, query, _ := strings.Cut(good, "?")

	notFound := func(name, u, word string) {
		t.Helper()
		r := fh.do("GET", u, "", nil)
		e := r.wantError(t, 404, string(apierr.NotFound))
		if !strings.Contains(e.Message, word) || !strings.Contains(e.Message, "mint") || !strings.Contains(e.Message, "export again") {
			t.Errorf("%s: message %q, want %q and to mint or export again", name, e.Message, word)
		}
	}
	notFound("altered", path+"?"+strings.Replace(query, "r=7", "r=6", 1), "not valid")
	notFound("malformed", path+"?"+query+"&x=1", "not valid")
	notFound("no query", path, "not valid")
	other, _ := link.ParseKeys("k9=another-key-of-the-test-0123456789abcdef")
	notFound("unknown key", other.Sign(link.Link{Kind: link.Media, Expires: fh.now().Add(time.Hour).Unix(), Media: m.ID, Org: filesOrg}), "not valid")
	notFound("unknown media", fh.mediaLink(m.Lesson.ID+"#nope#video", time.Minute), "not valid")
	notFound("export of another contentVersion", fh.keys.Sign(link.Link{Kind: link.Export, Expires: fh.now().Add(time.Minute).Unix(), Name: "x.zip",
		Org: filesOrg, Gen: fh.org.Generation, Export: link.Bundle{Scopes: "service-api/content.export", ContentVersion: fh.corpus().ContentVersion + "-other",
			Tier: m.Lesson.Subject.Tier, Slug: m.Lesson.Subject.Slug}}), "not valid")

	// Valid while now < expiresAt, on the server's clock.
	if r := fh.do("GET", good, "", nil); r.status != 200 {
		t.Fatalf("before expiry: %d", r.status)
	}
	fh.clock.Add(int64(time.Minute - time.Second))
	if r := fh.do("GET", good, "", nil); r.status != 200 {
		t.Fatalf("a second before expiry: %d", r.status)
	}
	fh.clock.Add(int64(time.Second))
	notFound("at expiry", good, "expired")

	for _, method := range []string{"POST", "PUT", "DELETE"} {
		r := fh.do(method, good, "", nil)
		r.wantError(t, 405, string(apierr.MethodNotAllowed))
		if r.header.Get("Allow") != "GET, HEAD" {
			t.Errorf("%s: Allow %q, want GET, HEAD", method, r.header.Get("Allow"))
		}
	}
}

// A media id the corpus being served does not hold (a reload dropped it)
// is refused, though its link is authentic.
func TestFilesAssetOfAnotherCorpus(t *testing.T) {
	fh := newFilesHarness(t, smallContent(t, ""))
	m := someMedia(t, fh.corpus(), 1)
	u := fh.mediaLink(m.ID, time.Hour)
	fh.content.Store(&Content{Corpus: &corpus.Corpus{Dir: t.TempDir(), ContentVersion: "2099-01-01+other"}})
	r := fh.do("GET", u, "", nil)
	r.wantError(t, 404, string(apierr.NotFound))
}

func TestSyntheticSeeks(t *testing.T) {
	const size = 1000
	whole, _ := io.ReadAll(newSynthetic("a#b#video", size))
	if len(whole) != size {
		t.Fatalf("%d bytes, want %d", len(whole), size)
	}
	s := newSynthetic("a#b#video", size)
	for _, off := range []int64{0, 1, 15, 16, 17, 500, 999} {
		if _, err := s.Seek(off, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 37)
		n, _ := io.ReadFull(s, buf)
		if want := whole[off:min(off+37, size)]; !bytes.Equal(buf[:n], want) {
			t.Errorf("at %d: bytes differ", off)
		}
	}
	if end, _ := s.Seek(0, io.SeekEnd); end != size {
		t.Errorf("SeekEnd = %d", end)
	}
	if n, err := s.Read(make([]byte, 4)); n != 0 || err != io.EOF {
		t.Errorf("read at the end: %d, %v", n, err)
	}
	if _, err := s.Seek(-1, io.SeekStart); err == nil {
		t.Error("a negative position was accepted")
	}
	if empty, _ := io.ReadAll(newSynthetic("x", 0)); len(empty) != 0 {
		t.Error("a 0-byte asset has bytes")
	}
}

// A location whose directory is a file holds no asset: the stand-in is
// served, not a 500.
func TestFilesLocationUnderAFile(t *testing.T) {
	ct := smallContentIn(t, t.TempDir())
	c := ct.Corpus
	m := someMedia(t, c, 1)
	first, _, _ := strings.Cut(m.Location, "/")
	if err := os.WriteFile(filepath.Join(c.Dir, first), []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	fh := newFilesHarness(t, ct)
	r := fh.do("GET", fh.mediaLink(m.ID, time.Minute), "", nil)
	if want, _ := io.ReadAll(newSynthetic(m.ID, m.Bytes)); r.status != 200 || !bytes.Equal(r.body, want) {
		t.Errorf("got %d, %d bytes; want the synthetic %d", r.status, len(r.body), m.Bytes)
	}
}

// A HEAD of an export link answers the Content-Length of the zip a GET of
// it sends, byte for byte (the bundle is deterministic, so HEAD builds
// and counts it), unmetered like the GET; the GET streams the zip, so its
// length is the bytes read.
func TestExportLinkHeadLength(t *testing.T) {
	h := newExportHarness(t, 0)
	sub := multiClass(t, h.corpus())
	tok := h.exporter("org")
	for _, path := range []string{"/v1/exports/subjects/" + sub.Slug + "?tier=" + sub.Tier, "/v1/exports/classes/" + sub.Tier + "/" + sub.Slug + "/2"} {
		b := decodeExport(t, h.get(path, tok), "format", "url", "expiresAt", "classes", "contentVersion", "_license")
		rel := strings.TrimPrefix(b.URL, h.api)
		before := h.usage("org")
		head := h.do("HEAD", rel, "", nil)
		get := h.get(rel, "")
		wantStatus(t, head, 200)
		wantStatus(t, get, 200)
		if cl := head.header.Get("Content-Length"); len(head.body) != 0 || cl != strconv.Itoa(len(get.body)) {
			t.Errorf("%s: HEAD Content-Length %q, %d body bytes; the GET sent %d bytes", path, cl, len(head.body), len(get.body))
		}
		if head.header.Get("Content-Type") != "application/zip" || head.header.Get("Content-Disposition") != get.header.Get("Content-Disposition") {
			t.Errorf("%s: HEAD Content-Type %q, Content-Disposition %q (GET's %q)", path, head.header.Get("Content-Type"),
				head.header.Get("Content-Disposition"), get.header.Get("Content-Disposition"))
		}
		zipFiles(t, get.body)
		h.cost("HEAD and GET of "+path, "org", before, 0, 0, 0)
	}
}
