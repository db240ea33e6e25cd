package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// A dry run (-dry-run) asks the API only GET /v1/license, which is
// unmetered (and the token endpoint, which bills nothing); the subject
// listing bills a call a page, so a dry run does not make it. It decides
// from the licence status, the state and the files what a run would do
// with each subject held, and what that bills: exactly, when the state
// is current (the same contentVersion and grants), else as a range, since
// only the listing says which contentDigests moved and which subjects a
// new grant brings.

// planned is what a run would do with one subject (or one new grant).
type planned struct {
	Subject string `json:"subject"`
	// Action is fetch, resume (a pending export's valid link: no new
	// export), repair, unchanged, remove, kept (outside the selection) or
	// "fetch if changed" (the contentVersion moved: the listing decides).
	Action    string `json:"action"`
	Reason    string `json:"reason,omitempty"`
	Exports   int    `json:"exports"`
	Downloads int    `json:"downloads"`
	Calls     int    `json:"calls"`
	// Known is false when the listing decides whether it is billed, and
	// Downloads is 0 when the number of classes is not known.
	Known bool `json:"known"`
}

// dryRun is the plan of a dry run: each subject's, and what the run would
// bill, at least and at most (equal when every line is known; Unknown
// when no bound is known: a new grant's subjects).
type dryRun struct {
	Plan    []planned        `json:"plan"`
	AtLeast map[string]int64 `json:"atLeast"`
	AtMost  map[string]int64 `json:"atMost"`
	Unknown bool             `json:"unknown,omitempty"`
}

// plan fills s.sum.DryRun from lic and the state, without a billed call.
func (s *syncer) plan(lic license) {
	st := &s.m.st
	d := &dryRun{AtLeast: map[string]int64{}, AtMost: map[string]int64{}}
	current := st.Complete && st.ContentVersion == s.ver && sameGrants(st.Grants, lic.ContentGrants)
	listing := !current
	add := func(p planned) {
		d.Plan = append(d.Plan, p)
		for k, v := range map[string]int{"exports": p.Exports, "downloads": p.Downloads, "calls": p.Calls} {
			d.AtMost[k] += int64(v)
			if p.Known {
				d.AtLeast[k] += int64(v)
			}
		}
	}
	refs := make([]string, 0, len(st.Subjects))
	for ref := range st.Subjects {
		refs = append(refs, ref)
	}
	slices.Sort(refs)
	for _, ref := range refs {
		h := st.Subjects[ref]
		switch {
		case !granted(lic.ContentGrants, ref):
			add(planned{Subject: ref, Action: "remove", Reason: removedUngranted, Known: true})
			continue
		case s.o.Prune && !s.o.selects(ref):
			add(planned{Subject: ref, Action: "remove", Reason: removedPruned, Known: true})
			continue
		case !s.o.selects(ref):
			add(planned{Subject: ref, Action: "kept", Reason: "outside the selection", Known: true})
			continue
		}
		classes := classesOf(s.m, h)
		if diffs := s.damage(ref, h); len(diffs) > 0 {
			listing = true
			add(s.fetchPlan(ref, "repair", damageLine(diffs), classes, true))
			continue
		}
		if current {
			add(planned{Subject: ref, Action: "unchanged", Known: true})
			continue
		}
		p := s.fetchPlan(ref, "fetch if changed", "the contentVersion moved to "+s.ver+"; the listing says whether this subject's contentDigest did", classes, false)
		add(p)
	}
	// A subject selected or granted by name and not held: fetched, its
	// classes (its downloads) known only from the listing.
	named := slices.Clone(s.o.Subjects)
	for _, g := range lic.ContentGrants {
		if strings.Contains(g, "/") && s.o.selects(g) && !slices.Contains(named, g) {
			named = append(named, g)
		}
	}
	slices.Sort(named)
	for _, ref := range named {
		if st.Subjects[ref] == nil {
			listing = true
			d.Unknown = true
			add(s.fetchPlan(ref, "fetch", "not held; a download per class", 0, true))
		}
	}
	// A tier granted whose subjects the state may not all hold (not held
	// whole at this contentVersion): only the listing names them.
	heldWhole := st.Complete && st.Filter == wholeFilter && st.ContentVersion == s.ver
	for _, g := range lic.ContentGrants {
		if strings.Contains(g, "/") || len(s.o.Subjects) > 0 || !s.o.selects(g+"/x") {
			continue
		}
		if heldWhole && slices.Contains(st.Grants, g) {
			continue
		}
		listing = true
		d.Unknown = true
		d.Plan = append(d.Plan, planned{Subject: g + "/*", Action: "fetch", Reason: "subjects of the tier not held (new, or new at " + s.ver + "): the listing names them; each bills 1 export, a download per class and 1 call"})
	}
	if listing {
		pages := (len(refs) + 99) / 100
		l := planned{Subject: "(listing)", Action: "list", Reason: "GET /v1/subjects: 1 call a page of 100 subjects", Calls: max(pages, 1), Known: true}
		if s.feedUnready(lic) == "" && !d.Unknown {
			// The run asks the change feed (free) first; it lists only
			// when the feed cannot answer from the since recorded.
			l.Known, l.Reason = false, l.Reason+", only if the change feed (free) cannot answer from the since recorded"
		}
		add(l)
	}
	s.sum.DryRun = d
}

// fetchPlan is what a new export of ref bills, or resuming its pending
// export when its link is still valid.
func (s *syncer) fetchPlan(ref, action, reason string, classes int, known bool) planned {
	if p := s.m.st.Pending[ref]; p != nil && p.ContentVersion == s.ver && s.o.now().Add(time.Minute).Before(p.ExpiresAt) {
		return planned{Subject: ref, Action: "resume", Reason: reason + "; its pending export's link is valid: no new export", Known: known}
	}
	return planned{Subject: ref, Action: action, Reason: reason, Exports: 1, Downloads: classes, Calls: 1, Known: known}
}

var classFile = regexp.MustCompile(`^class-[0-9]+\.json$`)

// classesOf is the subject's number of classes: as the state recorded it,
// else the class files its manifest lists (0 when unknown).
func classesOf(m *mirror, h *heldSubject) int {
	if h.Classes > 0 {
		return h.Classes
	}
	raw, err := os.ReadFile(filepath.Join(m.path("objects", h.Object), "manifest.json"))
	if err != nil {
		return 0
	}
	var bm bundleManifest
	if json.Unmarshal(raw, &bm) != nil {
		return 0
	}
	n := 0
	for _, f := range bm.Files {
		if classFile.MatchString(f.Name) {
			n++
		}
	}
	return n
}

// dryRunText is a dry run's plan as lines, and what it would bill.
func (s summary) dryRunText() string {
	d := s.DryRun
	var b strings.Builder
	for _, p := range d.Plan {
		fmt.Fprintf(&b, "%s: %s", p.Subject, p.Action)
		if p.Reason != "" {
			fmt.Fprintf(&b, " (%s)", p.Reason)
		}
		if p.Exports+p.Downloads+p.Calls > 0 {
			fmt.Fprintf(&b, ": bills exports %d, downloads %d, calls %d", p.Exports, p.Downloads, p.Calls)
			if !p.Known {
				b.WriteString(" if so")
			}
		}
		b.WriteByte('\n')
	}
	bill := func(m map[string]int64) string {
		return fmt.Sprintf("exports %d, downloads %d, calls %d", m["exports"], m["downloads"], m["calls"])
	}
	fmt.Fprintf(&b, "lectern sync -dry-run: at %s a run would bill ", s.ContentVersion)
	switch {
	case d.Unknown:
		fmt.Fprintf(&b, "at least %s, and more for the subjects only the listing names", bill(d.AtLeast))
	case fmt.Sprint(d.AtLeast) == fmt.Sprint(d.AtMost):
		b.WriteString(bill(d.AtLeast))
	default:
		fmt.Fprintf(&b, "from %s to %s (the listing says which subjects moved)", bill(d.AtLeast), bill(d.AtMost))
	}
	b.WriteString("; this dry run billed nothing (GET /v1/license only)")
	return b.String()
}
