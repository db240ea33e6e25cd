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
	f, added, err := s.indexFeed(fa)
	if err != nil {
		return false, err
	}
	if added != "" {
		return full(added + " was added")
	}
	s.sum.Feed = "feed"

	behind, err := s.removeFromFeed(f, lic)
	if err != nil {
		return true, err
	}
	if err := s.updateFromFeed(ctx, f); err != nil {
		return true, err
	}
	// The feed's next is where the next run starts once every subject
	// held is at this version and no change was left outside the
	// selection; else the since recorded stays.
	if !behind && s.allAt(s.ver) {
		st.Since, st.SinceVersion = fa.Next, s.ver
	}
	return true, nil
}

// feedIndex is the change feed's answer with what a run looks up in it.
type feedIndex struct {
	feedAnswer
	named   map[string]bool         // the subjects it names
	lessons map[string][]feedLesson // the classes it lists, by subject
	changed map[string]feedSubject  // the selected subjects it says changed
}

// indexFeed indexes the feed's answer fa, refusing one that names a
// subject twice or lists lessons of a subject it does not name. added is
// a selected subject the feed says was added (the run then takes the
// full path), or "".
func (s *syncer) indexFeed(fa feedAnswer) (f feedIndex, added string, err error) {
	f = feedIndex{feedAnswer: fa, named: map[string]bool{}, lessons: map[string][]feedLesson{}, changed: map[string]feedSubject{}}
	for _, l := range fa.Lessons {
		f.lessons[l.Subject] = append(f.lessons[l.Subject], l)
	}
	for _, fs := range fa.Subjects {
		if f.named[fs.Ref] {
			return feedIndex{}, "", fmt.Errorf("the change feed names %s twice", fs.Ref)
		}
		f.named[fs.Ref] = true
		if fs.Change == "added" && s.o.selects(fs.Ref) {
			return feedIndex{}, fs.Ref, nil
		}
		if fs.Change == "changed" && s.o.selects(fs.Ref) {
			f.changed[fs.Ref] = fs
		}
	}
	for ref := range f.lessons {
		if !f.named[ref] {
			return feedIndex{}, "", fmt.Errorf("the change feed lists lessons of %s without the subject", ref)
		}
	}
	return f, "", nil
}

// removeFromFeed takes out of the mirror what leaves: what no grant
// covers, selected or not; a selected subject the corpus no longer has.
// Each as the full path says it. behind is a change outside the
// selection, left for a later run.
func (s *syncer) removeFromFeed(f feedIndex, lic license) (behind bool, err error) {
	st := &s.m.st
	for _, fs := range f.Subjects {
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
			return behind, err
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
				return behind, err
			}
			s.sum.Subjects.Removed++
			s.sum.RemovedSubjects = append(s.sum.RemovedSubjects, removal{Subject: ref, Reason: removedUngranted})
		}
	}
	return behind, nil
}

// updateFromFeed brings up to date each selected subject held or the
// feed says changed, in order; a subject held outside the selection is
// counted, and known at this version when the feed does not name it.
func (s *syncer) updateFromFeed(ctx context.Context, f feedIndex) error {
	st := &s.m.st
	refs := sortedKeys(st.Subjects)
	for ref := range f.changed {
		if st.Subjects[ref] == nil {
			refs = append(refs, ref)
		}
	}
	slices.Sort(refs)
	s.prog = progress{total: len(refs)}
	for _, ref := range refs {
		if err := stopIfInterrupted(ctx); err != nil {
			return err
		}
		h := st.Subjects[ref]
		if !s.o.selects(ref) {
			s.sum.Subjects.Outside++
			if _, moved := f.named[ref]; !moved && h.ContentVersion == f.From {
				h.ContentVersion = s.ver // its content is the same at both versions
			}
			continue
		}
		fetched := s.sum.Subjects.Fetched
		if err := s.feedSubject(ctx, f, ref, h); err != nil {
			return err
		}
		s.progressed(fetched)
	}
	return nil
}

// feedSubject brings the selected subject ref (h: as held, or nil) up to
// date: not changed, the held copy checked and repaired if damaged;
// changed, from its class exports when they can make it, else exported
// whole.
func (s *syncer) feedSubject(ctx context.Context, f feedIndex, ref string, h *heldSubject) error {
	tier, slug, _ := strings.Cut(ref, "/")
	fs, ok := f.changed[ref]
	if !ok {
		return s.subject(ctx, subject{Tier: tier, Slug: slug, ClassCount: h.Classes, ContentDigest: h.Digest})
	}
	sub := subject{Tier: tier, Slug: slug, ClassCount: fs.ClassCount, ContentDigest: fs.ContentDigest}
	err := errNotExact
	switch {
	case h == nil || h.Digest == sub.ContentDigest:
	case fs.FieldsChanged:
		s.say("%s: its own fields changed, which class exports do not carry: exporting the subject", ref)
	case h.ContentVersion != f.From:
	case len(s.damage(ref, h)) > 0:
	default:
		err = s.byClasses(ctx, sub, f.lessons[ref], f.License)
		if errors.Is(err, errNotExact) {
			s.say("%s: exporting the subject: %v", ref, err)
		}
	}
	if errors.Is(err, errNotExact) {
		return s.subject(ctx, sub)
	}
	return err
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
