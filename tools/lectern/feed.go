package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// The change feed in a sync (issue #37, point 2; docs/integrating.md,
// "Class by class"). A mirror that recorded where it stands (state.Since)
// asks GET /v1/changes (free) what moved since, instead of listing the
// subjects (a billed call a page), and brings up to date only what the
// feed names: a subject removed leaves, a subject whose classes changed is
// updated from class exports when the cost rule prefers them
// (classes.go), else exported whole.
//
// The feed is trusted for a subject only when the copy held is the
// content of the version the feed starts from (its heldSubject's
// ContentVersion is the since's, or already the version served): a
// subject updated by a selection at a later version than the since is
// not what the feed's lessons are relative to. The run takes the full
// path (the listing and subject exports, as before the feed) when:
// nothing is recorded to start from (a mirror made before the feed), the
// feed answers 410 (or 404: a server without it), the since is a bare
// version and the grants moved, a selected subject held is at another
// version, a selected subject was added, -prune, or the feed is at
// another version than the licence status read a moment before.

// viaFeed brings the selected subjects up to date through the change
// feed. It reports false, having changed nothing and billed nothing, when
// the run is to take the full path; s.sum.Feed says why.
func (s *syncer) viaFeed(ctx context.Context, lic license) (bool, error) {
	st := &s.m.st
	full := func(why string) (bool, error) {
		s.sum.Feed = "full: " + why
		return false, nil
	}
	if why := s.feedUnready(lic); why != "" {
		return full(why)
	}
	fa, err := s.api.changes(ctx, st.Since)
	if errors.Is(err, errFeedGone) {
		return full(err.Error())
	}
	if err != nil {
		return false, stopOr(err, "read the change feed")
	}
	switch {
	case fa.To != s.ver:
		return full("the feed is at " + fa.To + ", the licence status at " + s.ver)
	case fa.From != st.SinceVersion:
		return full("the feed answered from " + fa.From + ", not from " + st.SinceVersion)
	}
	lessons := map[string][]feedLesson{}
	for _, l := range fa.Lessons {
		lessons[l.Subject] = append(lessons[l.Subject], l)
	}
	named := map[string]bool{}
	for _, fs := range fa.Subjects {
		if named[fs.Ref] {
			return false, fmt.Errorf("the change feed names %s twice", fs.Ref)
		}
		named[fs.Ref] = true
		if fs.Change == "added" && s.o.selects(fs.Ref) {
			return full(fs.Ref + " was added")
		}
	}
	for ref := range lessons {
		if !named[ref] {
			return false, fmt.Errorf("the change feed lists lessons of %s without the subject", ref)
		}
	}
	s.sum.Feed = "feed"

	// What leaves: what no grant covers, selected or not; a selected
	// subject the corpus no longer has. Each as the full path says it.
	behind := false // a change outside the selection is left for a later run
	for _, fs := range fa.Subjects {
		if fs.Change != "removed" {
			if !s.o.selects(fs.Ref) {
				behind = true
			}
			continue
		}
		why := removedUngranted
		if granted(lic.ContentGrants, fs.Ref) {
			if !s.o.selects(fs.Ref) {
				behind = true
				continue
			}
			why = removedUnlisted
		}
		delete(st.Pending, fs.Ref)
		s.dropClassPending(fs.Ref)
		if st.Subjects[fs.Ref] == nil {
			continue
		}
		if err := s.remove(fs.Ref); err != nil {
			return true, err
		}
		s.sum.Subjects.Removed++
		s.sum.RemovedSubjects = append(s.sum.RemovedSubjects, removal{Subject: fs.Ref, Reason: why})
		s.say("removed %s: %s", fs.Ref, why)
	}
	// A subject no grant covers any more, held outside what the feed
	// names (a grant's change read through a bare version): it leaves too.
	for _, ref := range sortedKeys(st.Subjects) {
		if !granted(lic.ContentGrants, ref) {
			if err := s.remove(ref); err != nil {
				return true, err
			}
			s.sum.Subjects.Removed++
			s.sum.RemovedSubjects = append(s.sum.RemovedSubjects, removal{Subject: ref, Reason: removedUngranted})
		}
	}

	changed := map[string]feedSubject{}
	for _, fs := range fa.Subjects {
		if fs.Change == "changed" && s.o.selects(fs.Ref) {
			changed[fs.Ref] = fs
		}
	}
	refs := sortedKeys(st.Subjects)
	for ref := range changed {
		if st.Subjects[ref] == nil {
			refs = append(refs, ref)
		}
	}
	slices.Sort(refs)
	s.prog = progress{total: len(refs)}
	for _, ref := range refs {
		if err := stopIfInterrupted(ctx); err != nil {
			return true, err
		}
		h := st.Subjects[ref]
		if !s.o.selects(ref) {
			s.sum.Subjects.Outside++
			if _, moved := named[ref]; !moved && h.ContentVersion == fa.From {
				h.ContentVersion = s.ver // its content is the same at both versions
			}
			continue
		}
		fetched := s.sum.Subjects.Fetched
		tier, slug, _ := strings.Cut(ref, "/")
		fs, ok := changed[ref]
		if !ok {
			// Not changed: the held copy, checked; repaired if damaged.
			if err := s.subject(ctx, subject{Tier: tier, Slug: slug, ClassCount: h.Classes, ContentDigest: h.Digest}); err != nil {
				return true, err
			}
			s.progressed(fetched)
			continue
		}
		sub := subject{Tier: tier, Slug: slug, ClassCount: fs.ClassCount, ContentDigest: fs.ContentDigest}
		err := errNotExact
		switch {
		case h == nil || h.Digest == sub.ContentDigest:
		case fs.FieldsChanged:
			s.say("%s: its own fields changed, which class exports do not carry: exporting the subject", ref)
		case h.ContentVersion != fa.From:
		case len(s.damage(ref, h)) > 0:
		default:
			err = s.byClasses(ctx, sub, lessons[ref], fa.License)
			if errors.Is(err, errNotExact) {
				s.say("%s: exporting the subject: %v", ref, err)
			}
		}
		if errors.Is(err, errNotExact) {
			err = s.subject(ctx, sub)
		}
		if err != nil {
			return true, err
		}
		s.progressed(fetched)
	}
	// The feed's next is where the next run starts once every subject
	// held is at this version and no change was left outside the
	// selection; else the since recorded stays.
	all := !behind
	for _, h := range st.Subjects {
		all = all && h.ContentVersion == s.ver
	}
	if all {
		st.Since, st.SinceVersion = fa.Next, s.ver
	}
	return true, nil
}

// feedUnready is why the run cannot ask the feed, or "" when it can.
func (s *syncer) feedUnready(lic license) string {
	st := &s.m.st
	switch {
	case st.Since == "":
		return "no since recorded (a mirror made before the change feed, or never completed)"
	case s.o.Prune:
		return "-prune"
	case !strings.HasPrefix(st.Since, "s1.") && !sameGrants(st.Grants, lic.ContentGrants):
		return "the grants moved since the version recorded"
	}
	for _, ref := range sortedKeys(st.Subjects) {
		if h := st.Subjects[ref]; s.o.selects(ref) && h.ContentVersion != st.SinceVersion && h.ContentVersion != s.ver {
			return ref + " is held at " + h.ContentVersion + ", not at the since's " + st.SinceVersion
		}
	}
	return ""
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
