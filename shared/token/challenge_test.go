package token

import (
	"strings"
	"testing"

	"github.com/lectern-api/lectern/shared/apierr"
)

const (
	realm = "lectern"
	prm   = "https://api.lectern.test/.well-known/oauth-protected-resource"
)

func TestChallenge(t *testing.T) {
	for _, tc := range []struct {
		name                            string
		realm, code, desc, resourceMeta string
		want                            string
	}{
		{"expired", realm, "invalid_token", ReasonExpired, prm,
			`Bearer realm="lectern", error="invalid_token", error_description="token expired", resource_metadata="` + prm + `"`},
		{"quote and backslash escaped", `a"b\c`, "invalid_token", `say "hi" \o/`, prm,
			`Bearer realm="a\"b\\c", error="invalid_token", error_description="say \"hi\" \\o/", resource_metadata="` + prm + `"`},
		{"controls, DEL and non-ASCII dropped", "r\r\nealm", "invalid_token", "a\x00b\tc\x7fd\u00e9e", "u\nrl",
			`Bearer realm="realm", error="invalid_token", error_description="abcde", resource_metadata="url"`},
		{"header injection impossible", realm, "invalid_token", "x\r\nSet-Cookie: a=b", prm,
			`Bearer realm="lectern", error="invalid_token", error_description="xSet-Cookie: a=b", resource_metadata="` + prm + `"`},
		{"empty optional parameters left out", realm, "invalid_token", "", "",
			`Bearer realm="lectern", error="invalid_token"`},
	} {
		if got := Challenge(tc.realm, tc.code, tc.desc, tc.resourceMeta); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}

func TestScopeChallenge(t *testing.T) {
	e := InsufficientScope("content.export")
	want := `Bearer realm="lectern", error="insufficient_scope", error_description="` + e.Message +
		`", scope="service-api/content.export", resource_metadata="` + prm + `"`
	if got := ScopeChallenge(realm, "content.export", prm); got != want {
		t.Errorf("\n got %s\nwant %s", got, want)
	}
}

func TestErrors(t *testing.T) {
	u := Unauthorized(ReasonExpired)
	if u.Code != apierr.InvalidToken || u.Status() != 401 || !strings.Contains(u.Message, ReasonExpired) {
		t.Errorf("Unauthorized: %+v", u)
	}
	s := InsufficientScope("media.download")
	if s.Code != apierr.InsufficientScope || s.Status() != 403 || s.Scope != "service-api/media.download" ||
		!strings.Contains(s.Message, "service-api/media.download") {
		t.Errorf("InsufficientScope: %+v", s)
	}
	body := string(s.AppendJSON(nil, "req-1"))
	if !strings.Contains(body, `"scope":"service-api/media.download"`) {
		t.Errorf("body %s does not name the scope", body)
	}
}

func TestBearerToken(t *testing.T) {
	for _, tc := range []struct {
		header, token, reason string
	}{
		{"Bearer abc.def.ghi", "abc.def.ghi", ""},
		{"bearer abc", "abc", ""},
		{"BEARER abc", "abc", ""},
		{"Bearer   abc", "abc", ""}, // 1*SP
		{"  Bearer abc \t", "abc", ""},
		{"Bearer a-b_c~d+e/f==", "a-b_c~d+e/f==", ""},
		{"Bearer a.b.c", "a.b.c", ""},
		{"", "", ReasonNoHeader},
		{" \t", "", ReasonNoHeader},
		{"Basic dXNlcjpwYXNz", "", ReasonNotBearer},
		{"Bearerabc", "", ReasonNotBearer},
		{"Bearer\tabc", "", ReasonNotBearer},
		{"Token abc", "", ReasonNotBearer},
		{"abc.def.ghi", "", ReasonNotBearer},
		{"Bearer", "", ReasonNoToken},
		{"Bearer ", "", ReasonNoToken},
		{"Bearer abc def", "", ReasonNoToken},
		{"Bearer abc, Basic x", "", ReasonNoToken},
		{"Bearer a=b", "", ReasonNoToken},
		{"Bearer ===", "", ReasonNoToken},
		{"Bearer abc\x00", "", ReasonNoToken},
		{"Bearer \"abc\"", "", ReasonNoToken},
		{"Bearer realm=\"x\"", "", ReasonNoToken},
	} {
		token, reason, ok := BearerToken(tc.header)
		if token != tc.token || reason != tc.reason || ok != (tc.reason == "") {
			t.Errorf("BearerToken(%q) = %q, %q, %v; want %q, %q", tc.header, token, reason, ok, tc.token, tc.reason)
		}
	}
}

func FuzzBearerToken(f *testing.F) {
	f.Add("Bearer abc.def.ghi")
	f.Add("bearer  a==")
	f.Fuzz(func(t *testing.T, h string) {
		tok, reason, ok := BearerToken(h)
		if ok != (reason == "") || ok != (tok != "") {
			t.Fatalf("BearerToken(%q) = %q, %q, %v", h, tok, reason, ok)
		}
		if ok && !strings.Contains(h, tok) {
			t.Fatalf("token %q not from %q", tok, h)
		}
	})
}

func TestChallengeFor(t *testing.T) {
	const rm = "https://api.example/.well-known/oauth-protected-resource"
	if got, want := ChallengeFor(Unauthorized(ReasonExpired), "lectern", rm),
		`Bearer realm="lectern", error="invalid_token", error_description="token expired", resource_metadata="`+rm+`"`; got != want {
		t.Errorf("invalid_token: got %s, want %s", got, want)
	}
	if got, want := ChallengeFor(InsufficientScope("content.export"), "lectern", rm), ScopeChallenge("lectern", "content.export", rm); got != want {
		t.Errorf("insufficient_scope: got %s, want %s", got, want)
	}
	if got := ChallengeFor(apierr.New(apierr.OrgSuspended, "x"), "lectern", rm); got != "" {
		t.Errorf("ORG_SUSPENDED has a challenge: %s", got)
	}
}
