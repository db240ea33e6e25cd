package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/store"
)

// Bad flags and bad -tier or -subject values exit 2 before any billed
// call (#35, 10), with the rules of shared/id (#35, 11): a slug with a
// doubled hyphen or over 64 bytes is no slug, and a tier is one of
// id.Tiers. Flags after DIR work.
func TestSyncFlags(t *testing.T) {
	s := newTestStack(t, func(o *store.Org) { o.Grants = []string{"high", "middle/algebra"} })
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string // in the error output
	}{
		{[]string{"-tier", "bogus", dir}, `-tier: "bogus" is not a tier`},
		{[]string{"-tier", "High", dir}, `-tier: "High" is not a tier`},
		{[]string{"-tier", ",", dir}, "-tier names no tier"},
		{[]string{"-subject", "high", dir}, `-subject: "high" is not tier/slug`},
		{[]string{"-subject", "high/Algebra", dir}, `-subject: "high/Algebra" is not tier/slug`},
		{[]string{"-subject", "high/a--b", dir}, `-subject: "high/a--b" is not tier/slug`},
		{[]string{"-subject", "high/" + strings.Repeat("a", 65), dir}, "is not tier/slug"},
		{[]string{"-subject", "nope/algebra", dir}, `-subject: "nope/algebra" is not tier/slug`},
		{[]string{"-tier", "middle", "-subject", "high/algebra", dir}, "-subject high/algebra is not of a -tier named"},
		{[]string{"-bogus", dir}, "flag provided but not defined"},
		{[]string{dir, "other"}, "want one directory"},
		{[]string{dir, "-tier", "bogus"}, `-tier: "bogus" is not a tier`},
		{[]string{"-tier", "primary", dir}, "-tier primary: not granted"},
		{[]string{"-subject", "middle/world-history", dir}, "-subject middle/world-history: not granted"},
	} {
		var out, errb bytes.Buffer
		code := run(t.Context(), append([]string{"sync"}, tc.args...), s.env(), &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%q: exit %d, want 2 saying %q: %s", tc.args, code, tc.want, errb.String())
		}
	}
	u := s.usage()
	if got := u.Get(meter.MonthCalls); got != 0 {
		t.Errorf("bad flags billed %d calls", got)
	}

	// A granted tier without that slug: known only from the listing, so
	// refused after its call, before any export.
	var out0, errb0 bytes.Buffer
	if code := run(t.Context(), []string{"sync", "-subject", "high/no-such", dir}, s.env(), &out0, &errb0); code != 2 ||
		!strings.Contains(errb0.String(), "-subject high/no-such: the organisation's subjects have no such subject") || s.exports() != 0 {
		t.Errorf("-subject high/no-such: exit %d, %d exports: %s", code, s.exports(), errb0.String())
	}

	// Flags after DIR work, before or after it alike.
	var out, errb bytes.Buffer
	if code := run(t.Context(), []string{"sync", "-json", dir, "-subject", "high/algebra", "-quiet"}, s.env(), &out, &errb); code != 0 {
		t.Fatalf("flags after DIR: exit %d: %s", code, errb.String())
	}
	st := loadStateFile(t, dir)
	if len(st.Subjects) != 1 || st.Subjects["high/algebra"] == nil {
		t.Errorf("flags after DIR: the mirror holds %v", st.Subjects)
	}
	// After --, what follows is the directory, even if it looks like a flag.
	t.Chdir(t.TempDir())
	if code := run(t.Context(), []string{"sync", "-quiet", "-subject", "high/algebra", "--", "-dir"}, s.env(), &out, &errb); code != 0 {
		t.Fatalf("-- -dir: exit %d: %s", code, errb.String())
	}
	if st := loadStateFile(t, "-dir"); st.Subjects["high/algebra"] == nil {
		t.Errorf("-- -dir: the mirror holds %v", st.Subjects)
	}
}
