package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Class-level updates (issue #37, point 2; docs/integrating.md, "Class by
// class"; docs/decisions/lectern-sync.md). A subject whose classes changed,
// and nothing else of it, is brought up to date from the class exports of
// the classes the change feed names, not from a new export of the whole
// subject: the new copy is built beside the old one, file by file, to be
// byte for byte what a subject export of the new version gives, and
// swapped in as a subject export's is.
//
// What a subject bundle holds, and how each file is brought up to date:
//
//   - class-<N>.json of a changed or added class: the class bundle's, as
//     shipped (a class export holds the same kinds of file for one class).
//   - class-<N>.json of a class that did not change: the held file, whose
//     closing members `,"contentVersion":"…","_license":{…}}` name the
//     version it was exported at; the version is replaced by the new one.
//   - class-<N>.transcript.md: the class bundle's, or the held file (a
//     hard link: a transcript carries no version).
//   - media-manifest.json: {"contentVersion", "items"}, an asset a line in
//     class order; the held lines of the classes kept, the class bundles'
//     of the classes changed, under the new version.
//   - LICENSE.txt: the class bundle's (the terms, the organisation, its
//     licence, tag and the version: nothing of the target); with no class
//     exported (classes removed only), the held one with the new version.
//   - manifest.json: the held one with the new version, each class's entry
//     from its bundle or kept, the classes past the new count dropped, and
//     every file's size and sha256 as written.
//
// Each derivation is checked where it can be: a held file that is not of
// the form above, a class bundle whose version, envelope, organisation or
// licence text is not what the held copy gives under the new version, or a
// manifest that does not encode back to its own bytes, is errNotExact, and
// the subject is exported whole instead.

// errNotExact is a subject a class-level update cannot make exactly: it
// is exported whole.
var errNotExact = errors.New("not exactly derivable from class exports")

// subjectManifest is a bundle's manifest.json, every member in the
// server's order: encoded as json.MarshalIndent(m, "", "  ") and a
// newline, it is the file's bytes (readManifestExact checks it is).
type subjectManifest struct {
	Format         string          `json:"format"`
	ContentVersion string          `json:"contentVersion"`
	Stamp          json.RawMessage `json:"stamp"`
	License        json.RawMessage `json:"_license"`
	Subject        string          `json:"subject"`
	ClassNum       *int            `json:"classNum"`
	Classes        []manifestClass `json:"classes"`
	Files          []manifestFile  `json:"files"`
}

type manifestClass struct {
	LessonID string   `json:"lessonId"`
	ClassNum int      `json:"classNum"`
	Title    string   `json:"title"`
	Files    []string `json:"files"`
}

type manifestFile struct {
	Name   string `json:"name"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

func (m *subjectManifest) encode() ([]byte, error) {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// readManifestExact reads the manifest.json in dir, which must encode
// back to its own bytes and list, in order, each class's files and then
// media-manifest.json and LICENSE.txt.
func readManifestExact(dir string) (*subjectManifest, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return nil, err
	}
	var m subjectManifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("%w: manifest.json: %v", errNotExact, err)
	}
	if b, err := m.encode(); err != nil || !bytes.Equal(b, raw) {
		return nil, fmt.Errorf("%w: manifest.json is not of the layout this lectern rewrites", errNotExact)
	}
	var want []string
	for i, c := range m.Classes {
		if m.ClassNum == nil && c.ClassNum != i+1 || c.LessonID != m.Subject+"/"+strconv.Itoa(c.ClassNum) {
			return nil, fmt.Errorf("%w: manifest.json lists class %d (%s) at %d", errNotExact, c.ClassNum, c.LessonID, i+1)
		}
		for _, f := range c.Files {
			if f != classFileName(c.ClassNum) && f != transcriptFile(c.ClassNum) {
				return nil, fmt.Errorf("%w: manifest.json gives class %d a file %q", errNotExact, c.ClassNum, f)
			}
		}
		want = append(want, c.Files...)
	}
	want = append(want, "media-manifest.json", "LICENSE.txt")
	if len(want) != len(m.Files) {
		return nil, fmt.Errorf("%w: manifest.json lists %d files, its classes %d", errNotExact, len(m.Files), len(want))
	}
	for i, f := range m.Files {
		if f.Name != want[i] {
			return nil, fmt.Errorf("%w: manifest.json lists %q where %q goes", errNotExact, f.Name, want[i])
		}
	}
	return &m, nil
}

func classFileName(n int) string  { return "class-" + strconv.Itoa(n) + ".json" }
func transcriptFile(n int) string { return "class-" + strconv.Itoa(n) + ".transcript.md" }

// mediaLines is a media-manifest.json as lines: its head
// (`{"contentVersion":"…","items":[`) and an asset a line.
type mediaLines struct {
	head  string
	items []mediaLine
}

type mediaLine struct {
	lessonID string
	raw      string
}

// parseMediaLines reads a media-manifest.json, which must encode back to
// its own bytes (bytes).
func parseMediaLines(raw []byte) (mediaLines, error) {
	const itemsKey, end = `,"items":[`, "\n]}\n"
	s := string(raw)
	i := strings.Index(s, itemsKey)
	if !strings.HasPrefix(s, `{"contentVersion":`) || i < 0 || !strings.HasSuffix(s, end) || len(s) < i+len(itemsKey)+len(end) {
		return mediaLines{}, fmt.Errorf("%w: media-manifest.json is not of the layout this lectern rewrites", errNotExact)
	}
	m := mediaLines{head: s[:i+len(itemsKey)]}
	body := s[len(m.head) : len(s)-len(end)]
	if body != "" {
		if body[0] != '\n' {
			return mediaLines{}, fmt.Errorf("%w: media-manifest.json is not an asset a line", errNotExact)
		}
		lines := strings.Split(body[1:], "\n")
		for j, l := range lines {
			if j < len(lines)-1 {
				var ok bool
				if l, ok = strings.CutSuffix(l, ","); !ok {
					return mediaLines{}, fmt.Errorf("%w: media-manifest.json is not an asset a line", errNotExact)
				}
			}
			var it struct {
				LessonID string `json:"lessonId"`
			}
			if err := json.Unmarshal([]byte(l), &it); err != nil {
				return mediaLines{}, fmt.Errorf("%w: media-manifest.json: %v", errNotExact, err)
			}
			m.items = append(m.items, mediaLine{lessonID: it.LessonID, raw: l})
		}
	}
	if !bytes.Equal(m.bytes(), raw) {
		return mediaLines{}, fmt.Errorf("%w: media-manifest.json is not of the layout this lectern rewrites", errNotExact)
	}
	return m, nil
}

func (m mediaLines) bytes() []byte {
	var b strings.Builder
	b.WriteString(m.head)
	for i, it := range m.items {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
		b.WriteString(it.raw)
	}
	b.WriteString("\n]}\n")
	return []byte(b.String())
}

// safeVersion is a contentVersion written into a file without escaping.
var safeVersion = regexp.MustCompile(`^[0-9A-Za-z.+-]{1,80}$`)

// revision rewrites the held files of one subject from version old to
// version to.
type revision struct{ old, to string }

// head is media-manifest.json's head at the new version.
func (r revision) head(h string) (string, error) {
	from, to := `{"contentVersion":"`+r.old+`",`, `{"contentVersion":"`+r.to+`",`
	rest, ok := strings.CutPrefix(h, from)
	if !ok {
		return "", fmt.Errorf("%w: media-manifest.json is not of version %s", errNotExact, r.old)
	}
	return to + rest, nil
}

// classDoc is a class file at the new version: its closing members name
// the version after the last `,"contentVersion":` (a key no string value
// holds unescaped).
func (r revision) classDoc(b []byte) ([]byte, error) {
	const key = `,"contentVersion":`
	i := bytes.LastIndex(b, []byte(key))
	old := key + `"` + r.old + `",`
	if i < 0 || !bytes.HasPrefix(b[i:], []byte(old)) {
		return nil, fmt.Errorf("%w: a class file does not close with contentVersion %s", errNotExact, r.old)
	}
	out := make([]byte, 0, len(b)+len(r.to)-len(r.old))
	out = append(out, b[:i]...)
	out = append(out, key+`"`+r.to+`",`...)
	return append(out, b[i+len(old):]...), nil
}

// licence is LICENSE.txt at the new version.
func (r revision) licence(b []byte) ([]byte, error) {
	from, to := "\nContent version: "+r.old+"\n", "\nContent version: "+r.to+"\n"
	if bytes.Count(b, []byte(from)) != 1 {
		return nil, fmt.Errorf("%w: LICENSE.txt does not name version %s once", errNotExact, r.old)
	}
	return bytes.Replace(b, []byte(from), []byte(to), 1), nil
}

// classPlan is what one subject's class-level update does: the classes
// to export (changed or added) and the count of classes after it.
type classPlan struct {
	export  []int
	removed []int
	count   int
}

// planClasses is the plan of sub (its new digest and class count) from
// the feed's lessons of it; a plan the feed's lessons do not make whole
// (a class removed before the end, an added one past it) is errNotExact.
func planClasses(sub subject, lessons []feedLesson, held int) (classPlan, error) {
	p := classPlan{count: sub.ClassCount}
	for _, l := range lessons {
		switch {
		case l.Change == "removed" && l.Class > sub.ClassCount && l.Class <= held:
			p.removed = append(p.removed, l.Class)
		case l.Change != "removed" && l.Class <= sub.ClassCount && (l.Change == "added") == (l.Class > held):
			p.export = append(p.export, l.Class)
		default:
			return p, fmt.Errorf("%w: the feed says class %d %s (%d classes held, %d now)", errNotExact, l.Class, l.Change, held, sub.ClassCount)
		}
	}
	if sub.ClassCount < held && len(p.removed) != held-sub.ClassCount || sub.ClassCount > held && len(p.export) < sub.ClassCount-held {
		return p, fmt.Errorf("%w: the feed does not name every class added or removed", errNotExact)
	}
	return p, nil
}

// cost is what a way of bringing a subject up to date bills, and the
// bytes it downloads (estimated from the copy held).
type cost struct {
	calls, exports, downloads int64
	bytes                     int64
}

// share is the largest share of what remains of a capped monthly meter
// (calls, exports, downloads) that c spends: c's units over the limit
// less the units used (quota) and already planned by this run (spent).
// An uncapped meter costs nothing; a meter with less left than c needs
// makes it +Inf.
func (c cost) share(quota map[string]quotaUse, spent cost) float64 {
	worst := 0.0
	for _, m := range []struct {
		name        string
		need, spent int64
	}{{"calls", c.calls, spent.calls}, {"exports", c.exports, spent.exports}, {"downloads", c.downloads, spent.downloads}} {
		q, ok := quota[m.name]
		if !ok || q.Limit == nil || m.need == 0 {
			continue
		}
		left := *q.Limit - q.Used - m.spent
		if left < m.need {
			return math.Inf(1)
		}
		worst = max(worst, float64(m.need)/float64(left))
	}
	return worst
}

// cheaper reports whether a is to be chosen over b: the smaller largest
// share of a capped meter's remainder, ties to fewer bytes (docs/
// integrating.md, Class by class).
func cheaper(a, b cost, quota map[string]quotaUse, spent cost) bool {
	sa, sb := a.share(quota, spent), b.share(quota, spent)
	if sa != sb {
		return sa < sb
	}
	return a.bytes < b.bytes
}

// costs are what the class plan p and a subject export of sub bill, from
// the held manifest's sizes (a class not held: the classes' mean).
func costs(p classPlan, sub subject, m *subjectManifest) (classes, whole cost) {
	size := map[int]int64{}
	var all int64
	files := map[string]int64{}
	for _, f := range m.Files {
		files[f.Name] = f.Bytes
	}
	for _, c := range m.Classes {
		for _, f := range c.Files {
			size[c.ClassNum] += files[f]
		}
		all += size[c.ClassNum]
	}
	mean := int64(0)
	if len(m.Classes) > 0 {
		mean = all / int64(len(m.Classes))
	}
	shared := files["media-manifest.json"] + files["LICENSE.txt"] + 4096
	of := func(n int) int64 {
		if s, ok := size[n]; ok {
			return s
		}
		return mean
	}
	k := int64(len(p.export))
	classes = cost{calls: k, exports: k, downloads: k}
	for _, n := range p.export {
		classes.bytes += of(n) + shared
	}
	whole = cost{calls: 1, exports: 1, downloads: int64(sub.ClassCount), bytes: shared}
	for n := 1; n <= sub.ClassCount; n++ {
		whole.bytes += of(n)
	}
	return classes, whole
}

// byClasses brings sub up to date from class exports when the cost rule
// prefers them: it returns errNotExact (nothing billed, nothing changed)
// when the subject is to be exported whole instead, with why said.
func (s *syncer) byClasses(ctx context.Context, sub subject, lessons []feedLesson, env envelope) error {
	st := &s.m.st
	ref := sub.ref()
	h := st.Subjects[ref]
	// A copy built by a run killed before its swap: swapped now.
	if p := st.Pending[ref]; p != nil && p.Object != "" && p.Digest == sub.ContentDigest && p.ContentVersion == s.ver {
		if _, err := os.Stat(filepath.Join(s.m.path("objects", p.Object), "manifest.json")); err == nil {
			s.sum.Subjects.Verified++
			s.sum.Subjects.Fetched++
			return s.swapClasses(sub, p.Object, p.Files, p.Bytes)
		}
	}
	old := s.m.path("objects", h.Object)
	m, err := readManifestExact(old)
	if err != nil {
		return err
	}
	if m.ClassNum != nil || m.Subject != ref || len(m.Classes) != h.Classes && h.Classes != 0 {
		return fmt.Errorf("%w: the held manifest is not of the subject's %d classes", errNotExact, h.Classes)
	}
	plan, err := planClasses(sub, lessons, len(m.Classes))
	if err != nil {
		return err
	}
	byClass, whole := costs(plan, sub, m)
	if !cheaper(byClass, whole, s.lic.Quota, s.spent) {
		return fmt.Errorf("%w: %d class exports spend more of what is left of the quota than one subject export", errNotExact, len(plan.export))
	}
	r := revision{old: m.ContentVersion, to: s.ver}
	if !safeVersion.MatchString(r.old) || !safeVersion.MatchString(r.to) {
		return fmt.Errorf("%w: contentVersion %q or %q", errNotExact, r.old, r.to)
	}
	// With no class to export, what the class bundles would tell is
	// checked against what the held copy and the feed say: the envelope
	// and the organisation unchanged.
	if len(plan.export) == 0 {
		var held envelope
		if json.Unmarshal(m.License, &held) != nil || held != env {
			return fmt.Errorf("%w: the licence envelope moved", errNotExact)
		}
		var stamp struct {
			OrgID   string `json:"orgId"`
			OrgName string `json:"orgName"`
		}
		if json.Unmarshal(m.Stamp, &stamp) != nil || stamp.OrgID != s.lic.OrgID || stamp.OrgName != s.lic.OrgName {
			return fmt.Errorf("%w: the organisation's name moved", errNotExact)
		}
	}
	s.spent.calls += byClass.calls
	s.spent.exports += byClass.exports
	s.spent.downloads += byClass.downloads
	bundles := map[int]string{}
	for _, n := range plan.export {
		if err := stopIfInterrupted(ctx); err != nil {
			return err
		}
		dir, err := s.classBundle(ctx, sub, n)
		if err != nil {
			return err
		}
		bundles[n] = dir
	}
	object, files, size, err := s.buildFromClasses(sub, h, m, r, plan, bundles)
	if errors.Is(err, errNotExact) {
		// The class bundles do not fit the held copy: the caller exports
		// the subject, saying why (the class exports made are spent).
		s.dropClassPending(ref)
		return err
	}
	if err != nil {
		return fmt.Errorf("update %s from its classes: %w", ref, err)
	}
	st.Pending[ref] = &pendingExport{Digest: sub.ContentDigest, ContentVersion: s.ver, Object: object, Files: files, Bytes: size}
	if err := s.m.save(); err != nil {
		return fmt.Errorf("write the state: %w", err)
	}
	step("built")
	s.sum.Subjects.Verified++
	s.sum.Subjects.Fetched++
	s.sum.Classes.Fetched += len(plan.export)
	s.sum.Classes.Removed += len(plan.removed)
	s.say("%s: %d classes exported, %d removed: updated from its classes", ref, len(plan.export), len(plan.removed))
	return s.swapClasses(sub, object, files, size)
}

// swapClasses swaps sub's link to object and forgets its class exports.
func (s *syncer) swapClasses(sub subject, object string, files int, size int64) error {
	if err := s.swap(sub, object, files, size); err != nil {
		return err
	}
	s.dropClassPending(sub.ref())
	return s.m.save()
}

// dropClassPending forgets the class exports of the subject ref, and
// removes their files.
func (s *syncer) dropClassPending(ref string) {
	for key, p := range s.m.st.ClassPending {
		if strings.HasPrefix(key, ref+"/") {
			if p.Object != "" {
				os.RemoveAll(s.m.path("tmp", p.Object))
			}
			os.Remove(s.m.path("tmp", classPart(key)))
			delete(s.m.st.ClassPending, key)
		}
	}
}

// classPart is the download of the class export key (a lessonId).
func classPart(key string) string { return strings.ReplaceAll(key, "/", "-") + ".zip" }

// classBundle is the directory under tmp/ holding class n of sub, its
// bundle verified against its manifest: kept from an earlier run, or
// exported (one call, one export, one download), downloaded and checked.
func (s *syncer) classBundle(ctx context.Context, sub subject, n int) (string, error) {
	st := &s.m.st
	key := sub.ref() + "/" + strconv.Itoa(n)
	valid := func(p *pendingExport) bool {
		return p != nil && p.Digest == sub.ContentDigest && p.ContentVersion == s.ver
	}
	if p := st.ClassPending[key]; valid(p) && p.Object != "" {
		if _, err := os.Stat(s.m.path("tmp", p.Object, "manifest.json")); err == nil {
			return s.m.path("tmp", p.Object), nil
		}
	}
	part := s.m.path("tmp", classPart(key))
	for attempt := 0; ; attempt++ {
		p := st.ClassPending[key]
		if !valid(p) || p.URL == "" || !s.o.now().Add(time.Minute).Before(p.ExpiresAt) {
			os.Remove(part)
			x, err := s.api.exportClass(ctx, sub, n)
			if err != nil {
				return "", stopOr(err, "export "+key)
			}
			p = &pendingExport{URL: x.URL, ExpiresAt: x.ExpiresAt, Digest: sub.ContentDigest, ContentVersion: s.ver}
			st.ClassPending[key] = p
			if err := s.m.save(); err != nil {
				return "", err
			}
			step("class exported")
		}
		etag, err := fetch(ctx, s.plain, p.URL, part, p.ETag, func(have, total int64, etag string) error {
			if etag != p.ETag {
				p.ETag = etag
				return s.m.save()
			}
			return nil
		}, func(n int) { s.sum.Bytes += int64(n) })
		if errors.Is(err, errLinkGone) && attempt == 0 {
			delete(st.ClassPending, key)
			continue
		}
		if err != nil {
			return "", fmt.Errorf("download %s: %w", key, err)
		}
		p.ETag = etag
		break
	}
	name := strings.ReplaceAll(key, "/", "-") + ".d"
	dir := s.m.path("tmp", name)
	os.RemoveAll(dir)
	files, _, err := unpackBundle(part, dir, sub.ref())
	if err != nil {
		os.RemoveAll(dir)
		if localFault(err) {
			return "", fmt.Errorf("unpack %s: %w", key, err)
		}
		os.Remove(part)
		delete(st.ClassPending, key)
		return "", fmt.Errorf("verify %s: %w", key, err)
	}
	st.ClassPending[key].Object = name
	if err := s.m.save(); err != nil {
		return "", err
	}
	step("class verified")
	os.Remove(part)
	s.sum.Files.Fetched += files
	s.sum.Files.Verified += files
	return dir, nil
}

// stepHook, when set (tests), is told each step of a class-level update
// once the state records it: where a kill is simulated.
var stepHook func(step string)

func step(name string) {
	if stepHook != nil {
		stepHook(name)
	}
}

// buildFromClasses writes the new copy of sub into a new object beside
// the held one (m, its manifest, at old's version) from the class bundles
// (by class number, verified), and returns it with its files and bytes.
func (s *syncer) buildFromClasses(sub subject, h *heldSubject, m *subjectManifest, r revision, plan classPlan, bundles map[int]string) (object string, files int, size int64, err error) {
	ref := sub.ref()
	old := s.m.path("objects", h.Object)
	media, head, licence, err := r.heldAtNew(old)
	if err != nil {
		return "", 0, 0, err
	}
	exported, err := checkClassBundles(ref, r, m, bundles, head, licence)
	if err != nil {
		return "", 0, 0, err
	}

	sum := sha256.Sum256([]byte(ref + "\x00" + sub.ContentDigest + "\x00" + s.ver + "\x00" + time.Now().String()))
	object = sub.Tier + "-" + sub.Slug + "-" + hex.EncodeToString(sum[:6])
	tmp := s.m.path("objects", object+".tmp")
	os.RemoveAll(tmp)
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return "", 0, 0, err
	}
	d := &draft{dir: tmp, old: old, nm: &subjectManifest{Format: m.Format, ContentVersion: r.to, Stamp: m.Stamp, License: m.License, Subject: ref}}
	items, err := d.putClasses(ref, r, m, plan.count, bundles, exported, media)
	if err != nil {
		return "", 0, 0, err
	}
	if err := d.finish(mediaLines{head: head, items: items}, licence); err != nil {
		return "", 0, 0, err
	}
	if err := os.Rename(tmp, s.m.path("objects", object)); err != nil {
		return "", 0, 0, err
	}
	return object, len(d.nm.Files) + 1, d.size, nil
}

// heldAtNew reads the held object in old's media manifest and licence
// text, and returns them as they read at the new version: the media's
// lines, its head and the licence text rewritten.
func (r revision) heldAtNew(old string) (media mediaLines, head string, licence []byte, err error) {
	oldMedia, err := readFileMax(filepath.Join(old, "media-manifest.json"), 64<<20)
	if err != nil {
		return mediaLines{}, "", nil, err
	}
	if media, err = parseMediaLines(oldMedia); err != nil {
		return mediaLines{}, "", nil, err
	}
	if head, err = r.head(media.head); err != nil {
		return mediaLines{}, "", nil, err
	}
	oldLicence, err := readFileMax(filepath.Join(old, "LICENSE.txt"), 1<<20)
	if err != nil {
		return mediaLines{}, "", nil, err
	}
	if licence, err = r.licence(oldLicence); err != nil {
		return mediaLines{}, "", nil, err
	}
	return media, head, licence, nil
}

// classBundle is a class bundle checked: its manifest and media lines.
type classBundle struct {
	m     *subjectManifest
	media mediaLines
}

// checkClassBundles checks each class bundle (by class number) against
// the held subject m at r's new version: of this class, this version,
// this envelope and organisation, this licence text and media head, and
// media of this class only.
func checkClassBundles(ref string, r revision, m *subjectManifest, bundles map[int]string, head string, licence []byte) (map[int]classBundle, error) {
	checked := map[int]classBundle{}
	for n, dir := range bundles {
		cm, err := readManifestExact(dir)
		if err != nil {
			return nil, err
		}
		switch {
		case cm.ClassNum == nil || *cm.ClassNum != n || len(cm.Classes) != 1 || cm.Classes[0].ClassNum != n:
			return nil, fmt.Errorf("%w: the export of class %d is of another class", errNotExact, n)
		case cm.Subject != ref || cm.ContentVersion != r.to || cm.Format != m.Format:
			return nil, fmt.Errorf("%w: the export of class %d is of %s at %s (%s)", errNotExact, n, cm.Subject, cm.ContentVersion, cm.Format)
		case !bytes.Equal(cm.License, m.License) || !bytes.Equal(cm.Stamp, m.Stamp):
			return nil, fmt.Errorf("%w: the licence envelope or the organisation moved", errNotExact)
		}
		lt, err := readFileMax(filepath.Join(dir, "LICENSE.txt"), 1<<20)
		if err != nil {
			return nil, err
		}
		if !bytes.Equal(lt, licence) {
			return nil, fmt.Errorf("%w: LICENSE.txt is not the held one at the new version", errNotExact)
		}
		mb, err := readFileMax(filepath.Join(dir, "media-manifest.json"), 64<<20)
		if err != nil {
			return nil, err
		}
		ml, err := parseMediaLines(mb)
		if err != nil {
			return nil, err
		}
		if ml.head != head {
			return nil, fmt.Errorf("%w: the class's media-manifest.json is of another version", errNotExact)
		}
		lessonID := ref + "/" + strconv.Itoa(n)
		for _, it := range ml.items {
			if it.lessonID != lessonID {
				return nil, fmt.Errorf("%w: the export of class %d lists media of %s", errNotExact, n, it.lessonID)
			}
		}
		checked[n] = classBundle{cm, ml}
	}
	return checked, nil
}

// draft is a new object being written: its files go into dir, each
// listed in its manifest nm, and size counts their bytes; old is the held
// object it is built beside.
type draft struct {
	dir, old string
	nm       *subjectManifest
	size     int64
}

// put writes a file of the new object.
func (d *draft) put(name string, data []byte) error {
	if err := writeSynced(filepath.Join(d.dir, name), data); err != nil {
		return err
	}
	sum := sha256.Sum256(data)
	d.nm.Files = append(d.nm.Files, manifestFile{Name: name, Bytes: int64(len(data)), SHA256: hex.EncodeToString(sum[:])})
	d.size += int64(len(data))
	return nil
}

// link puts a held file, unchanged, by a hard link (a copy where the
// file system has none).
func (d *draft) link(name string, f manifestFile) error {
	if err := os.Link(filepath.Join(d.old, name), filepath.Join(d.dir, name)); err != nil {
		data, err := readFileMax(filepath.Join(d.old, name), f.Bytes)
		if err != nil {
			return err
		}
		return d.put(name, data)
	}
	d.nm.Files = append(d.nm.Files, f)
	d.size += f.Bytes
	return nil
}

// putClasses puts classes 1 to count, each from its checked bundle when
// exported, else the held one's at the new version, and returns their
// media lines in that order.
func (d *draft) putClasses(ref string, r revision, m *subjectManifest, count int, bundles map[int]string, exported map[int]classBundle, held mediaLines) ([]mediaLine, error) {
	heldFiles := map[string]manifestFile{}
	for _, f := range m.Files {
		heldFiles[f.Name] = f
	}
	var items []mediaLine
	for n := 1; n <= count; n++ {
		if dir, ok := bundles[n]; ok {
			if err := d.putExported(r, m, n, dir, exported[n].m.Classes[0]); err != nil {
				return nil, err
			}
			items = append(items, exported[n].media.items...)
			continue
		}
		if n > len(m.Classes) {
			return nil, fmt.Errorf("%w: class %d is neither held nor exported", errNotExact, n)
		}
		if err := d.putHeld(r, n, m.Classes[n-1], heldFiles); err != nil {
			return nil, err
		}
		lessonID := ref + "/" + strconv.Itoa(n)
		for _, it := range held.items {
			if it.lessonID == lessonID {
				items = append(items, it)
			}
		}
	}
	return items, nil
}

// putExported puts class n, c, from its bundle in dir; its class file
// must close as the held ones do at the new version.
func (d *draft) putExported(r revision, m *subjectManifest, n int, dir string, c manifestClass) error {
	d.nm.Classes = append(d.nm.Classes, c)
	for _, name := range c.Files {
		data, err := readFileMax(filepath.Join(dir, name), 1<<30)
		if err != nil {
			return err
		}
		if name == classFileName(n) {
			// Its closing members are the held files' at the new version.
			if _, err := r.classDocCheck(data, d.old, m); err != nil {
				return err
			}
		}
		if err := d.put(name, data); err != nil {
			return err
		}
	}
	return nil
}

// putHeld puts held class n, c: its transcript linked unchanged, its
// class file rewritten to the new version.
func (d *draft) putHeld(r revision, n int, c manifestClass, heldFiles map[string]manifestFile) error {
	d.nm.Classes = append(d.nm.Classes, c)
	for _, name := range c.Files {
		if name == transcriptFile(n) {
			if err := d.link(name, heldFiles[name]); err != nil {
				return err
			}
			continue
		}
		data, err := readFileMax(filepath.Join(d.old, name), heldFiles[name].Bytes)
		if err != nil {
			return err
		}
		if data, err = r.classDoc(data); err != nil {
			return err
		}
		if err := d.put(name, data); err != nil {
			return err
		}
	}
	return nil
}

// finish puts the media manifest and the licence text, then writes the
// manifest itself (not listed in itself, counted in size) and syncs the
// directory: the object is complete, to be renamed into place.
func (d *draft) finish(media mediaLines, licence []byte) error {
	if err := d.put("media-manifest.json", media.bytes()); err != nil {
		return err
	}
	if err := d.put("LICENSE.txt", licence); err != nil {
		return err
	}
	mb, err := d.nm.encode()
	if err != nil {
		return err
	}
	if err := writeSynced(filepath.Join(d.dir, "manifest.json"), mb); err != nil {
		return err
	}
	d.size += int64(len(mb))
	return syncDirEntry(d.dir)
}

// classDocCheck checks that a class bundle's class file closes as the
// held class files do at the new version (the same envelope after the
// version): what classDoc writes for the classes kept.
func (r revision) classDocCheck(data []byte, old string, m *subjectManifest) ([]byte, error) {
	const key = `,"contentVersion":`
	i := bytes.LastIndex(data, []byte(key))
	if i < 0 {
		return nil, fmt.Errorf("%w: a class file has no contentVersion", errNotExact)
	}
	tail := data[i:]
	if len(m.Classes) == 0 {
		return tail, nil
	}
	held, err := readFileMax(filepath.Join(old, classFileName(m.Classes[0].ClassNum)), 1<<30)
	if err != nil {
		return nil, err
	}
	moved, err := r.classDoc(held)
	if err != nil {
		return nil, err
	}
	if j := bytes.LastIndex(moved, []byte(key)); j < 0 || !bytes.Equal(moved[j:], tail) {
		return nil, fmt.Errorf("%w: the class export closes otherwise than the held classes at the new version", errNotExact)
	}
	return tail, nil
}

// writeSynced writes data to a new file at path, synced.
func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// readFileMax reads the file at path, of at most max bytes.
func readFileMax(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is over %d bytes", path, max)
	}
	return b, nil
}
