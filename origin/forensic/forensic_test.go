package forensic

import (
	"strings"
	"testing"

	"github.com/lectern-api/lectern/shared/scope"
)

func TestTag(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	read := scope.Of(scope.ContentRead)
	tag := Tag(key, "acme", read)
	if len(tag) != 18 || !strings.HasPrefix(tag, "t1") {
		t.Errorf("tag %q: want t1 + 16 characters", tag)
	}
	if Tag(key, "acme", read) != tag {
		t.Error("not deterministic")
	}
	for name, other := range map[string]string{
		"other org":   Tag(key, "acme2", read),
		"other scope": Tag(key, "acme", scope.Of(scope.ContentRead, scope.ContentExport)),
		"other key":   Tag([]byte("another key of thirty-two bytes!"), "acme", read),
	} {
		if other == tag {
			t.Errorf("%s gives the same tag", name)
		}
	}
	org, s, ok := Decode(key, tag, []string{"globex", "acme", "initech"})
	if !ok || org != "acme" || s != read {
		t.Errorf("Decode = %q, %v, %v; want acme, content.read", org, s, ok)
	}
	if _, _, ok := Decode(key, tag, []string{"globex"}); ok {
		t.Error("decoded a tag of an org not in the list")
	}
	if got := Licence("acme", 3); got != "lic_acme_ecla3" {
		t.Errorf("Licence = %q", got)
	}
}
