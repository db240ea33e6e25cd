package admin_test

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/admin"
	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/corpus/corpustest"
	"github.com/lectern-api/lectern/origin/export"
	"github.com/lectern-api/lectern/origin/forensic"
	"github.com/lectern-api/lectern/origin/lessondoc"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/shared/link"
	"github.com/lectern-api/lectern/shared/scope"
)

var (
	fxTagKey    = []byte("the test tag key of thirty-two b")
	fxCanaryKey = []byte("the test canary key of 32 bytes!")
	fxLinkKeys  = mustKeys("k1=0123456789abcdef0123456789abcdef")
	// Ten organisations: each class file names its own among them.
	fxOrgs       = []string{"acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne", "wonka", "tyrell", "cyberdyne"}
	fxCandidates = "?orgs=" + strings.Join(fxOrgs, ",")
)

func mustKeys(s string) link.Keys {
	k, err := link.ParseKeys(s)
	if err != nil {
		panic(err)
	}
	return k
}

// forensicsEnv serves the admin API with the forensics route: the test
// keys, a real meter store holding the ledger, and the ten orgs.
func forensicsEnv(t *testing.T) (*env, meter.Store) {
	t.Helper()
	m := meterStore(t)
	e := newEnv(t, func(c *admin.Config) {
		c.Meters = m
		c.Forensics = &admin.Forensics{Keys: forensic.Keys{Tag: fxTagKey, Canary: fxCanaryKey}, Links: fxLinkKeys}
	})
	for _, o := range fxOrgs {
		e.do("POST", "/admin/v1/orgs", `{"orgId":"`+o+`"}`).want(t, 201, "")
	}
	return e, m
}

// exportZip is org's zip of the class of l, exported with scopes.
func exportZip(t *testing.T, b *export.Builder, org string, s scope.Set, l *corpus.Lesson) []byte {
	t.Helper()
	var buf bytes.Buffer
	req := export.Request{Stamp: export.Stamp{OrgID: org, OrgName: "Org " + org},
		License: forensic.Envelope{Lic: forensic.Licence(org, 1), Tag: forensic.Tag(fxTagKey, org, s)},
		Target:  export.Target{Subject: l.Subject, Class: l.Number}}
	if _, err := b.WriteZip(&buf, req); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// zipFile is the file name of archive z.
func zipFile(t *testing.T, z []byte, name string) []byte {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(z), int64(len(z)))
	if err != nil {
		t.Fatal(err)
	}
	f, err := zr.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestForensicsClassFile: a bundle's class file exported for one of
// several organisations, its tag stripped and the JSON re-serialised, is
// named by its canaries; the zip whole is named by its tag with the
// scope set.
func TestForensicsClassFile(t *testing.T) {
	e, _ := forensicsEnv(t)
	c := corpustest.Small(t)
	set, err := lessondoc.Build(c)
	if err != nil {
		t.Fatal(err)
	}
	b := export.New(c, set, export.Config{CanaryKey: fxCanaryKey})
	var l *corpus.Lesson
	for _, x := range c.Lessons {
		if x.HasTranscript {
			l = x
			break
		}
	}
	s := scope.Of(scope.ContentRead, scope.ContentExport)
	for _, org := range fxOrgs {
		z := exportZip(t, b, org, s, l)
		var v map[string]any
		if err := json.Unmarshal(zipFile(t, z, fmt.Sprintf("class-%d.json", l.Number)), &v); err != nil {
			t.Fatal(err)
		}
		delete(v, "_license")
		stripped, _ := json.MarshalIndent(v, "", "  ")
		r := e.do("POST", "/admin/v1/forensics"+fxCandidates, string(stripped), "Content-Type", "application/json")
		r.want(t, 200, "")
		if r.body["orgId"] != org || r.body["scopes"] != "" {
			t.Fatalf("%s's class file, tag stripped: %s", org, r.raw)
		}
		m := r.body["matched"].([]any)[0].(map[string]any)
		if m["by"] != "canary" || m["orgId"] != org || m["bits"].(float64) < 64 || m["agreeing"] != m["bits"] {
			t.Errorf("%s: evidence %s", org, r.raw)
		}

		r = e.do("POST", "/admin/v1/forensics"+fxCandidates, string(z), "Content-Type", "application/zip")
		r.want(t, 200, "")
		if r.body["orgId"] != org || r.body["scopes"] != "service-api/content.read service-api/content.export" {
			t.Errorf("%s's zip: %s", org, r.raw)
		}
	}
	// Without orgs, every organisation in the store is a candidate.
	var v map[string]any
	json.Unmarshal(zipFile(t, exportZip(t, b, "globex", s, l), fmt.Sprintf("class-%d.json", l.Number)), &v)
	delete(v, "_license")
	stripped, _ := json.Marshal(v)
	r := e.do("POST", "/admin/v1/forensics", string(stripped))
	r.want(t, 200, "")
	if r.body["orgId"] != "globex" {
		t.Errorf("without orgs: %s", r.raw)
	}
	// With candidates that leave out its organisation, it names no one.
	r = e.do("POST", "/admin/v1/forensics"+strings.Replace(fxCandidates, "globex,", "", 1), string(stripped))
	r.want(t, 404, "NOT_FOUND")
	if msg, _ := r.errField("message").(string); !strings.Contains(msg, "No organisation matched") {
		t.Errorf("message: %s", r.raw)
	}
}

// TestForensicsLessonTag: a lesson document's _license.tag names the org
// and the scope set.
func TestForensicsLessonTag(t *testing.T) {
	e, _ := forensicsEnv(t)
	doc, _ := json.Marshal(map[string]any{"lessonId": "high/algebra/3", "cards": []map[string]string{{"body": "A sentence. Another one."}},
		"_license": forensic.Envelope{Lic: forensic.Licence("initech", 1), Tag: forensic.Tag(fxTagKey, "initech", scope.Of(scope.ContentRead))}})
	r := e.do("POST", "/admin/v1/forensics"+fxCandidates, string(doc), "Content-Type", "application/json")
	r.want(t, 200, "")
	if r.body["orgId"] != "initech" || r.body["scopes"] != "service-api/content.read" {
		t.Fatalf("tagged lesson: %s", r.raw)
	}
	m := r.body["matched"].([]any)[0].(map[string]any)
	if m["by"] != "tag" || m["orgId"] != "initech" {
		t.Errorf("evidence: %s", r.raw)
	}
}

// TestForensicsAcceptedSecret (#34, point 3): while LECTERN_SECRET is
// rotated, a tag made under the accepted secret's keys still names its
// organisation.
func TestForensicsAcceptedSecret(t *testing.T) {
	oldTag := []byte("the old tag key of thirty-two by")
	e := newEnv(t, func(c *admin.Config) {
		c.Meters = meterStore(t)
		c.Forensics = &admin.Forensics{Keys: forensic.Keys{Tag: fxTagKey, Canary: fxCanaryKey},
			Accepted: forensic.Keys{Tag: oldTag, Canary: []byte("the old canary key of 32 bytes!!")}, Links: fxLinkKeys}
	})
	e.do("POST", "/admin/v1/orgs", `{"orgId":"initech"}`).want(t, 201, "")
	doc, _ := json.Marshal(map[string]any{"lessonId": "high/algebra/3", "cards": []map[string]string{{"body": "A sentence."}},
		"_license": forensic.Envelope{Lic: forensic.Licence("initech", 1), Tag: forensic.Tag(oldTag, "initech", scope.Of(scope.ContentRead))}})
	r := e.do("POST", "/admin/v1/forensics?orgs=initech", string(doc), "Content-Type", "application/json")
	r.want(t, 200, "")
	if r.body["orgId"] != "initech" {
		t.Fatalf("a tag of the accepted secret: %s", r.raw)
	}
}

// TestForensicsLink: a signed link names the organisation of its ledger
// row, whole URL or path and query, live or expired; an altered link, or
// one of a key the deployment does not hold, is not authentic.
func TestForensicsLink(t *testing.T) {
	e, m := forensicsEnv(t)
	entry := meter.Entry{Kind: meter.KindMedia, Target: "high-algebra-1-img-0", Format: "url", Client: "cl_9",
		Scopes: []string{"service-api/media.download"}, ContentVersion: "2030-03-01+abcd", RequestID: "req-9",
		Expires: base.Add(15 * time.Minute), KeyID: "k1"}
	e.write(m, "acme", mediaEntry(0))
	row := e.write(m, "globex", entry)[0]
	signed := fxLinkKeys.Sign(link.Link{Kind: link.Media, Expires: base.Add(15 * time.Minute).Unix(), Row: row,
		Name: "img.png", Media: "high-algebra-1-img-0", Org: "globex"})
	for _, body := range []string{"https://lectern.example" + signed, signed + "\n"} {
		r := e.do("POST", "/admin/v1/forensics", body, "Content-Type", "text/plain")
		r.want(t, 200, "")
		if r.body["orgId"] != "globex" || r.body["scopes"] != "service-api/media.download" {
			t.Fatalf("link: %s", r.raw)
		}
		mt := r.body["matched"].([]any)[0].(map[string]any)
		rw := mt["row"].(map[string]any)
		if mt["by"] != "ledger" || mt["expired"] != false || rw["id"] != float64(row) || rw["clientId"] != "cl_9" || rw["target"] != "high-algebra-1-img-0" {
			t.Errorf("link evidence: %s", r.raw)
		}
	}

	expired := fxLinkKeys.Sign(link.Link{Kind: link.Media, Expires: base.Add(-time.Minute).Unix(), Row: row,
		Name: "img.png", Media: "high-algebra-1-img-0", Org: "globex"})
	r := e.do("POST", "/admin/v1/forensics", expired)
	r.want(t, 200, "")
	if r.body["orgId"] != "globex" || r.body["matched"].([]any)[0].(map[string]any)["expired"] != true {
		t.Errorf("expired link: %s", r.raw)
	}

	// The row id pointed at another org's row: the signature no longer
	// matches.
	altered := strings.Replace(signed, fmt.Sprintf("&r=%d&", row), fmt.Sprintf("&r=%d&", row-1), 1)
	if altered == signed {
		t.Fatal("the test did not alter the link")
	}
	r = e.do("POST", "/admin/v1/forensics", altered)
	r.want(t, 404, "NOT_FOUND")
	if msg, _ := r.errField("message").(string); !strings.Contains(msg, "Not authentic") || r.body["orgId"] != nil {
		t.Errorf("altered link: %s", r.raw)
	}
	other := mustKeys("k2=fedcba9876543210fedcba9876543210").Sign(link.Link{Kind: link.Media,
		Expires: base.Add(15 * time.Minute).Unix(), Row: row, Name: "img.png", Media: "high-algebra-1-img-0", Org: "globex"})
	r = e.do("POST", "/admin/v1/forensics", other)
	r.want(t, 404, "NOT_FOUND")
	if msg, _ := r.errField("message").(string); !strings.Contains(msg, "Not authentic") {
		t.Errorf("foreign key: %s", r.raw)
	}
	// Authentic, but of a row that does not exist.
	ghost := fxLinkKeys.Sign(link.Link{Kind: link.Media, Expires: base.Add(15 * time.Minute).Unix(), Row: row + 100,
		Name: "img.png", Media: "x", Org: "globex"})
	e.do("POST", "/admin/v1/forensics", ghost).want(t, 404, "NOT_FOUND")
}

// TestForensicsRefusals: garbage is not recognised, an empty body is
// 400, an oversize one 413, a bad query 400, and no token 401.
func TestForensicsRefusals(t *testing.T) {
	e, _ := forensicsEnv(t)
	for _, body := range []string{"garbage, not a leak", "PK\x03\x04 not a zip", "/files/x/y?z=1", "https://lectern.example/files/m/a.png?k=k1"} {
		r := e.do("POST", "/admin/v1/forensics?orgs=acme", body)
		r.want(t, 404, "NOT_FOUND")
		if msg, _ := r.errField("message").(string); !strings.Contains(msg, "Not recognised") {
			t.Errorf("%q: %s", body, r.raw)
		}
	}
	e.do("POST", "/admin/v1/forensics", " \n").want(t, 400, "BAD_REQUEST")
	e.do("POST", "/admin/v1/forensics?orgs=acme&x=1", "{}").want(t, 400, "BAD_REQUEST")
	e.do("POST", "/admin/v1/forensics", strings.Repeat("{", admin.MaxLeak+1)).want(t, 413, "PAYLOAD_TOO_LARGE")
	r := e.do("POST", "/admin/v1/forensics", "{}", "Authorization", "")
	r.want(t, 401, "")
	e.do("GET", "/admin/v1/forensics", "").want(t, 405, "METHOD_NOT_ALLOWED")

	// Unconfigured: not served.
	bare := newEnv(t, nil)
	bare.do("POST", "/admin/v1/forensics", "{}").want(t, 404, "NOT_FOUND")
}
