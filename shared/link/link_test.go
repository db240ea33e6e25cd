package link

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/lectern-api/lectern/shared/apierr"
)

const (
	secretA = "secret-a-0123456789abcdef0123456789abcdef"
	secretB = "secret-b-0123456789abcdef0123456789abcdef"
)

func mustKeys(t testing.TB, s string) Keys {
	t.Helper()
	k, err := ParseKeys(s)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

var (
	mediaLink = Link{Kind: Media, Org: "acme", Gen: "gen-1", Expires: 1_800_000_900, Row: 41, Name: "c2.mp4", Media: "high/algebra-i/3#c2#video"}
	classLink = Link{Kind: Export, Expires: 1_800_000_900, Row: 42, Name: "high-algebra-i-3.zip",
		Org: "acme", Gen: "gen-1", Export: Bundle{Scopes: "service-api/content.export service-api/content.read",
			ContentVersion: "2026-01-01+abc123", Tier: "high", Slug: "algebra-i", Class: 3}}
	subjectLink = Link{Kind: Export, Expires: 1_800_000_900, Row: 43, Name: "high-algebra-i.zip",
		Org: "acme", Gen: "gen-1", Export: Bundle{Scopes: "service-api/content.export",
			ContentVersion: "2026-01-01+abc123", Tier: "high", Slug: "algebra-i"}}
)

// split cuts a signed link into Parse's arguments.
func split(t testing.TB, signed string) (string, string) {
	t.Helper()
	path, query, ok := strings.Cut(signed, "?")
	if !ok {
		t.Fatalf("signed link %q has no query", signed)
	}
	return path, query
}

func parse(t testing.TB, signed string) Link {
	t.Helper()
	l, err := Parse(split(t, signed))
	if err != nil {
		t.Fatalf("Parse(%q): %v", signed, err)
	}
	return l
}

func TestRoundTrip(t *testing.T) {
	k := mustKeys(t, "a="+secretA)
	now := time.Unix(1_800_000_000, 0)
	for name, l := range map[string]Link{"media": mediaLink, "class": classLink, "subject": subjectLink} {
		t.Run(name, func(t *testing.T) {
			s := k.Sign(l)
			if !strings.HasPrefix(s, Prefix) || strings.HasPrefix(s, "/v1") {
				t.Fatalf("Sign = %q, want a path under %s", s, Prefix)
			}
			got := parse(t, s)
			want := l
			want.KeyID = "a"
			want.sig = got.sig
			if got != want {
				t.Errorf("Parse(Sign(l)) = %+v, want %+v", got, want)
			}
			if err := k.Verify(got, now); err != nil {
				t.Errorf("Verify: %v", err)
			}
			// A URL parser reads the same values (the query is well formed).
			u, err := url.Parse("http://x" + s)
			if err != nil || u.Query().Get("r") == "" {
				t.Errorf("net/url cannot read %q: %v", s, err)
			}
			if l, err := Parse(u.EscapedPath(), u.RawQuery); err != nil || k.Verify(l, now) != nil {
				t.Errorf("through net/url: %v", err)
			}
		})
	}
}

// Duplicates are distinct links: the row tells them apart.
func TestRowMakesDistinctLinks(t *testing.T) {
	k := mustKeys(t, "a="+secretA)
	l2 := mediaLink
	l2.Row++
	if k.Sign(mediaLink) == k.Sign(l2) {
		t.Error("two rows signed to one link")
	}
}

// Every field a link carries is signed: changing any one value in the
// URL is refused as altered (or unknown key, for the key id).
func TestEveryFieldAlteredIsRefused(t *testing.T) {
	k := mustKeys(t, "a="+secretA+",b="+secretB)
	now := time.Unix(1_800_000_000, 0)
	for name, l := range map[string]Link{"media": mediaLink, "class": classLink, "subject": subjectLink} {
		signed := k.Sign(l)
		path, query := split(t, signed)
		vals, _ := url.ParseQuery(query)
		for key := range vals {
			if key == "s" {
				continue
			}
			t.Run(name+"/"+key, func(t *testing.T) {
				v := vals.Get(key)
				alt := v + "1"
				if key == "k" {
					alt = "b"
				}
				pairs := strings.Split(query, "&")
				for i, p := range pairs {
					if strings.HasPrefix(p, key+"=") {
						pairs[i] = key + "=" + url.QueryEscape(alt)
					}
				}
				q := strings.Join(pairs, "&")
				got, err := Parse(path, q)
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				if err := k.Verify(got, now); !errors.Is(err, ErrAltered) {
					t.Errorf("Verify with %s altered = %v, want ErrAltered", key, err)
				}
			})
		}
		t.Run(name+"/name", func(t *testing.T) {
			got, err := Parse(path+"x", query)
			if err != nil {
				t.Fatal(err)
			}
			if err := k.Verify(got, now); !errors.Is(err, ErrAltered) {
				t.Errorf("Verify with the name altered = %v, want ErrAltered", err)
			}
		})
		t.Run(name+"/kind", func(t *testing.T) {
			other := "/files/e/"
			if l.Kind == Export {
				other = "/files/m/"
			}
			if _, err := Parse(other+strings.TrimPrefix(path, path[:len("/files/m/")]), query); !errors.Is(err, ErrMalformed) {
				t.Errorf("the other kind's path = %v, want ErrMalformed (its fields do not fit)", err)
			}
		})
		t.Run(name+"/signature", func(t *testing.T) {
			sig := vals.Get("s")
			flipped := []byte(sig)
			if flipped[3] == 'A' {
				flipped[3] = 'B'
			} else {
				flipped[3] = 'A'
			}
			got, err := Parse(path, strings.Replace(query, "s="+sig, "s="+string(flipped), 1))
			if err != nil {
				t.Fatal(err)
			}
			if err := k.Verify(got, now); !errors.Is(err, ErrAltered) {
				t.Errorf("Verify with the signature altered = %v, want ErrAltered", err)
			}
		})
	}
	// A class export and a subject export of the same subject differ.
	sub := classLink
	sub.Export.Class = 0
	if k.Sign(sub) == k.Sign(classLink) {
		t.Error("a class link and its subject's signed alike")
	}
	// A Link made by hand carries no signature.
	if err := k.Verify(Link{Kind: Media, KeyID: "a", Expires: 1_900_000_000}, now); !errors.Is(err, ErrAltered) {
		t.Errorf("Verify(unsigned) = %v, want ErrAltered", err)
	}
}

// Valid while now < expiresAt: at the expiry instant the link is dead.
func TestExpiryBoundary(t *testing.T) {
	k := mustKeys(t, "a="+secretA)
	l := parse(t, k.Sign(mediaLink))
	exp := time.Unix(mediaLink.Expires, 0)
	for _, tc := range []struct {
		now  time.Time
		want error
	}{
		{exp.Add(-time.Hour), nil},
		{exp.Add(-time.Nanosecond), nil},
		{exp, ErrExpired},
		{exp.Add(time.Second), ErrExpired},
	} {
		if err := k.Verify(l, tc.now); !errors.Is(err, tc.want) {
			t.Errorf("Verify at expiry%+v = %v, want %v", tc.now.Sub(exp), err, tc.want)
		}
	}
}

func TestUnknownKey(t *testing.T) {
	a := mustKeys(t, "a="+secretA)
	b := mustKeys(t, "b="+secretB)
	l := parse(t, a.Sign(mediaLink))
	if err := b.Verify(l, time.Unix(0, 0)); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("Verify with another key set = %v, want ErrUnknownKey", err)
	}
	// Same id, another secret: altered, not unknown.
	a2 := mustKeys(t, "a="+secretB)
	if err := a2.Verify(l, time.Unix(0, 0)); !errors.Is(err, ErrAltered) {
		t.Errorf("Verify with the id's secret changed = %v, want ErrAltered", err)
	}
	if err := (Keys{}).Verify(l, time.Unix(0, 0)); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("zero Keys: %v, want ErrUnknownKey", err)
	}
	if s := (Keys{}).Sign(mediaLink); s != "" {
		t.Errorf("zero Keys signed %q", s)
	}
}

// Rotation: the first key signs, every key verifies.
func TestRotation(t *testing.T) {
	old := mustKeys(t, "a="+secretA)
	rotated := mustKeys(t, "b="+secretB+", a="+secretA)
	now := time.Unix(1_800_000_000, 0)
	if err := rotated.Verify(parse(t, old.Sign(mediaLink)), now); err != nil {
		t.Errorf("a link of the old key after rotation: %v", err)
	}
	l := parse(t, rotated.Sign(mediaLink))
	if l.KeyID != "b" || rotated.SigningID() != "b" {
		t.Errorf("signed by %q (SigningID %q), want b", l.KeyID, rotated.SigningID())
	}
	if err := old.Verify(l, now); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("the old set on a new link: %v, want ErrUnknownKey", err)
	}
}

func TestConfigured(t *testing.T) {
	secret := []byte("the-deployment-secret-0123456789abcdef")
	d, err := Configured("", secret)
	if err != nil || d.SigningID() != DerivedID {
		t.Fatalf("Configured(\"\") = %v, %v; want the derived key", d.SigningID(), err)
	}
	now := time.Unix(1_800_000_000, 0)
	if err := Derived(secret).Verify(parse(t, d.Sign(mediaLink)), now); err != nil {
		t.Errorf("derived keys disagree: %v", err)
	}
	if err := Derived([]byte("another-secret-0123456789abcdef0123")).Verify(parse(t, d.Sign(mediaLink)), now); !errors.Is(err, ErrAltered) {
		t.Errorf("another secret's key verified: %v", err)
	}
	k, err := Configured("x="+secretA, secret)
	if err != nil || k.SigningID() != "x" {
		t.Errorf("Configured(x=...) = %q, %v", k.SigningID(), err)
	}
}

// TestDerivedEntry (#34, point 3): the entry "derived" is the key derived
// from the secret, so the three steps of a rotation away from it keep
// every link: "derived,new=…" (the derived key signs, both verify),
// "new=…,derived" (the new one signs), "new=…".
func TestDerivedEntry(t *testing.T) {
	secret := []byte("the-deployment-secret-0123456789abcdef")
	now := time.Unix(1_800_000_000, 0)
	before := parse(t, Derived(secret).Sign(mediaLink)) // no LECTERN_URL_KEYS
	steps := []struct {
		list, signs string
	}{
		{"derived, n=" + secretA, DerivedID},
		{"n=" + secretA + ",derived", "n"},
	}
	for _, st := range steps {
		k, err := Configured(st.list, secret)
		if err != nil {
			t.Fatalf("Configured(%q): %v", st.list, err)
		}
		if k.SigningID() != st.signs {
			t.Errorf("%q signs with %q, want %q", st.list, k.SigningID(), st.signs)
		}
		if err := k.Verify(before, now); err != nil {
			t.Errorf("%q: a link of the derived key made before: %v", st.list, err)
		}
		if err := Derived(secret).Verify(parse(t, k.Sign(mediaLink)), now); st.signs == DerivedID && err != nil {
			t.Errorf("%q: its link does not verify where the list is unset: %v", st.list, err)
		}
	}
	// Unresolved (ParseKeys alone), the entry signs and verifies nothing.
	k := mustKeys(t, "derived")
	if s := k.Sign(mediaLink); s != "" {
		t.Errorf("an unresolved derived entry signed %q", s)
	}
	if err := k.Verify(before, now); !errors.Is(err, ErrAltered) {
		t.Errorf("an unresolved derived entry verified: %v", err)
	}
}

// TestDerivedAccepted: with a secret accepted beside the deployment's,
// the derived key signs with the first and verifies links of both.
func TestDerivedAccepted(t *testing.T) {
	oldS, newS := []byte("the-old-secret-0123456789abcdef0123"), []byte("the-new-secret-0123456789abcdef0123")
	now := time.Unix(1_800_000_000, 0)
	old := parse(t, Derived(oldS).Sign(mediaLink))
	for _, list := range []string{"", "derived", "n=" + secretA + ",derived"} {
		k, err := Configured(list, newS, oldS)
		if err != nil {
			t.Fatal(err)
		}
		if err := k.Verify(old, now); err != nil {
			t.Errorf("%q: a link of the accepted secret's key: %v", list, err)
		}
		if list != "" {
			continue
		}
		l := parse(t, k.Sign(mediaLink))
		if err := Derived(newS).Verify(l, now); err != nil {
			t.Errorf("not signed with the new secret's key: %v", err)
		}
		if err := Derived(oldS).Verify(l, now); !errors.Is(err, ErrAltered) {
			t.Errorf("signed with the accepted secret's key: %v", err)
		}
	}
	if err := Derived(newS).Verify(old, now); !errors.Is(err, ErrAltered) {
		t.Errorf("without the accepted secret: %v, want ErrAltered", err)
	}
}

func TestParseKeysRefuses(t *testing.T) {
	for _, s := range []string{
		"a", "=" + secretA, "a=short", "a=" + secretA + ",a=" + secretB, "a b=" + secretA,
		"a=" + secretA + ",", strings.Repeat("k", MaxKeyID+1) + "=" + secretA,
		"derived,derived", "derived,s=" + secretA, "s=" + secretA + ",derived", "s=derived", "derived=" + secretA + "x",
	} {
		_, err := ParseKeys(s)
		if err == nil {
			t.Errorf("ParseKeys(%q) accepted", s)
			continue
		}
		if strings.Contains(err.Error(), secretA) || strings.Contains(err.Error(), secretB) {
			t.Errorf("ParseKeys(%q) error quotes a secret: %v", s, err)
		}
	}
}

func TestParseRefusesMalformed(t *testing.T) {
	k := mustKeys(t, "a="+secretA)
	path, query := split(t, k.Sign(mediaLink))
	for name, in := range map[string][2]string{
		"v1 path":        {"/v1/files/m/c2.mp4", query},
		"no kind":        {"/files/c2.mp4", query},
		"unknown kind":   {"/files/z/c2.mp4", query},
		"empty name":     {"/files/m/", query},
		"nested name":    {"/files/m/a/c2.mp4", query},
		"dot name":       {"/files/m/..", query},
		"escaped name":   {"/files/m/c%32.mp4", query},
		"no query":       {path, ""},
		"unknown param":  {path, query + "&zz=1"},
		"repeated param": {path, query + "&r=41"},
		"empty pair":     {path, query + "&"},
		"missing sig":    {path, strings.Split(query, "&s=")[0]},
		"short sig":      {path, strings.Split(query, "&s=")[0] + "&s=AAAA"},
		"padded sig":     {path, query + "="},
		"export field":   {path, query + "&o=acme"},
		"bad expiry":     {path, strings.Replace(query, "x=", "x=+", 1)},
		"leading zero":   {path, strings.Replace(query, "r=41", "r=041", 1)},
		"bad escape":     {path, strings.Replace(query, "m=", "m=%zz", 1)},
		"long query":     {path, query + strings.Repeat("&", MaxQuery)},
	} {
		if _, err := Parse(in[0], in[1]); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: Parse(%q, %q) = %v, want ErrMalformed", name, in[0], in[1], err)
		}
	}
	p, q := split(t, k.Sign(classLink))
	if _, err := Parse(p, strings.Replace(q, "c=3", "c=0", 1)); !errors.Is(err, ErrMalformed) {
		t.Errorf("class 0 = %v, want ErrMalformed", err)
	}
}

func TestCleanName(t *testing.T) {
	for in, want := range map[string]string{
		"":                       "download",
		"c2.mp4":                 "c2.mp4",
		".hidden":                "_hidden",
		"a b/c?.zip":             "a_b_c_.zip",
		strings.Repeat("n", 200): strings.Repeat("n", MaxName),
	} {
		if got := CleanName(in); got != want {
			t.Errorf("CleanName(%q) = %q, want %q", in, got, want)
		}
	}
	k := mustKeys(t, "a="+secretA)
	l := mediaLink
	l.Name = "my file.mp4"
	if got := parse(t, k.Sign(l)); got.Name != "my_file.mp4" || k.Verify(got, time.Unix(0, 0)) != nil {
		t.Errorf("a cleaned name: %+v", got)
	}
}

func TestCheck(t *testing.T) {
	k := mustKeys(t, "a="+secretA)
	path, query := split(t, k.Sign(mediaLink))
	now := time.Unix(1_800_000_000, 0)
	for _, m := range []string{"GET", "HEAD"} {
		if l, e := k.Check(m, path, query, now); e != nil || l.Media != mediaLink.Media {
			t.Errorf("Check(%s) = %+v, %v", m, l, e)
		}
	}
	e405 := func() *apierr.Error { _, e := k.Check("POST", path, query, now); return e }()
	if e405 == nil || e405.Status() != 405 || len(e405.Headers()) != 1 || e405.Headers()[0].Value != "GET, HEAD" {
		t.Errorf("Check(POST) = %+v, want 405 with Allow: GET, HEAD", e405)
	}
	for name, tc := range map[string]struct {
		query string
		now   time.Time
		word  string
	}{
		"expired":   {query, time.Unix(mediaLink.Expires, 0), "expired"},
		"altered":   {strings.Replace(query, "r=41", "r=40", 1), now, "not valid"},
		"malformed": {query + "&x=1", now, "not valid"},
	} {
		_, e := k.Check("GET", path, tc.query, tc.now)
		if e == nil || e.Code != apierr.NotFound || !strings.Contains(e.Message, tc.word) ||
			!strings.Contains(e.Message, "mint") || !strings.Contains(e.Message, "export again") {
			t.Errorf("%s: Check = %+v, want 404 NOT_FOUND saying %q, to mint or export again", name, e, tc.word)
		}
	}
}

func FuzzParse(f *testing.F) {
	k := mustKeys(f, "a="+secretA)
	for _, l := range []Link{mediaLink, classLink, subjectLink} {
		p, q := split(f, k.Sign(l))
		f.Add(p, q)
	}
	f.Add("/files/m/x", "k=a&x=1&r=2&m=&s=")
	f.Add("/files/e/x", "")
	f.Add("/files/", "k=%zz")
	f.Fuzz(func(t *testing.T, path, query string) {
		l, err := Parse(path, query)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Parse error %v is not ErrMalformed", err)
			}
			return
		}
		// Whatever parses is a link: re-signed with a key of its id, it
		// parses to the same fields and verifies.
		key, err := ParseKeys(l.KeyID + "=" + secretA)
		if err != nil {
			t.Fatalf("a parsed link's key id %q is not one ParseKeys takes: %v", l.KeyID, err)
		}
		again, err := Parse(split(t, key.Sign(l)))
		if err != nil {
			t.Fatalf("re-signed %+v does not parse: %v", l, err)
		}
		again.sig = l.sig
		if again != l {
			t.Fatalf("round trip: got %+v, want %+v", again, l)
		}
	})
}

// A link names its organisation: one without o (or with it empty) or
// without g is malformed; g may be empty (an organisation older than
// generations).
func TestOrganisationRequired(t *testing.T) {
	k := mustKeys(t, "a="+secretA)
	for _, l := range []Link{mediaLink, classLink} {
		path, query := split(t, k.Sign(l))
		for _, cut := range []string{"&o=acme", "&g=gen-1"} {
			for _, with := range []string{"", "&o="} {
				if cut == "&g=gen-1" && with == "&o=" {
					continue
				}
				q := strings.Replace(query, cut, with, 1)
				if _, err := Parse(path, q); !errors.Is(err, ErrMalformed) {
					t.Errorf("Parse without %s (%q) = %v, want ErrMalformed", cut, q, err)
				}
			}
		}
		legacy := l
		legacy.Gen = ""
		if got := parse(t, k.Sign(legacy)); got.Gen != "" || got.Org != "acme" {
			t.Errorf("a link with an empty generation reads %q/%q", got.Org, got.Gen)
		}
	}
}
