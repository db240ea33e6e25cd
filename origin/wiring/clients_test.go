package wiring

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

// keyedPrefix starts a client secret stored keyed (origin/idp,
// secrets.go); bcrypt's hashes start "$2".
const keyedPrefix = "$lectern-hs256$"

// adminClient creates a client of org through o's admin API, over its
// listener, and returns its id and secret.
func adminClient(t *testing.T, o *Origin, org string) (id, secret string) {
	t.Helper()
	call := func(path, body string) []byte {
		req, _ := http.NewRequestWithContext(t.Context(), "POST", o.AdminURL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+o.AdminToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("POST %s: %d %s", path, resp.StatusCode, b.Bytes())
		}
		return b.Bytes()
	}
	if _, err := o.Store().GetOrg(t.Context(), org); err != nil {
		call("/admin/v1/orgs", `{"orgId":"`+org+`","contentGrants":["high"]}`)
	}
	var c struct{ ClientID, ClientSecret string }
	if err := json.Unmarshal(call("/admin/v1/orgs/"+org+"/clients", `{"scopes":["content.read"]}`), &c); err != nil {
		t.Fatal(err)
	}
	return c.ClientID, c.ClientSecret
}

// storedHash is the secret hash o's store holds for client id.
func storedHash(t *testing.T, o *Origin, id string) []byte {
	t.Helper()
	c, err := o.Store().GetClient(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return c.SecretHash
}

// firstToken asks o's identity provider for a client_credentials token;
// it fails the test unless 200.
func firstToken(t *testing.T, o *Origin, id, secret string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "POST", o.IdPURL+"/oauth2/token",
		strings.NewReader(url.Values{"grant_type": {"client_credentials"}}.Encode()))
	req.SetBasicAuth(id, secret)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("client %s: token: %d %s", id, resp.StatusCode, b.Bytes())
	}
}

// Issue #36, point 5: a client registered through the admin API (over
// its listener) is stored in the keyed form, so its first token costs no
// bcrypt comparison: its hash is the same after that token (a bcrypt
// hash would have been replaced, which is what follows a bcrypt check).
// make run's demo client is keyed too. What a token costs is the bench's
// tokens rows (docs/bench.md), not a timing here.
func TestAdminClientsAreKeyed(t *testing.T) {
	o := openOrigin(t, nil)
	const n = 5
	for range n {
		id, secret := adminClient(t, o, "acme")
		hash := storedHash(t, o, id)
		if !bytes.HasPrefix(hash, []byte(keyedPrefix)) {
			t.Errorf("client %s registered through the admin API is stored %.20q…, want %q…", id, hash, keyedPrefix)
		}
		firstToken(t, o, id, secret)
		if after := storedHash(t, o, id); !bytes.Equal(after, hash) {
			t.Errorf("client %s: its first token replaced its hash %.20q… by %.20q…", id, hash, after)
		}
	}

	var out bytes.Buffer
	if err := o.Announce(t.Context(), &out, true); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`client id +(\S+)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("the demo prints no client:\n%s", out.String())
	}
	if hash := storedHash(t, o, m[1]); !bytes.HasPrefix(hash, []byte(keyedPrefix)) {
		t.Errorf("make run's demo client is stored %.20q…, want %q…", hash, keyedPrefix)
	}
}

// Under Options.BcryptSecrets (LECTERN_CLIENT_SECRET_HASH=bcrypt, the
// rolling upgrade from 0.4.0) the admin API's and the demo's clients are
// stored in bcrypt, which 0.4.0 checks, and stay so after their tokens.
func TestAdminClientsBcryptSecrets(t *testing.T) {
	o := openOrigin(t, func(opts *Options) { opts.BcryptSecrets = true })
	var out bytes.Buffer
	if err := o.Announce(t.Context(), &out, true); err != nil {
		t.Fatal(err)
	}
	demo := regexp.MustCompile(`client id +(\S+)\n +client secret +(\S+)`).FindStringSubmatch(out.String())
	if demo == nil {
		t.Fatalf("the demo prints no client:\n%s", out.String())
	}
	id, secret := adminClient(t, o, "acme")
	for _, c := range []struct{ name, id, secret string }{{"admin API", id, secret}, {"demo", demo[1], demo[2]}} {
		firstToken(t, o, c.id, c.secret)
		hash := storedHash(t, o, c.id)
		if !bytes.HasPrefix(hash, []byte("$2")) {
			t.Errorf("%s client %s is stored %.20q…, want bcrypt", c.name, c.id, hash)
		}
		if bcrypt.CompareHashAndPassword(hash, []byte(c.secret)) != nil {
			t.Errorf("%s client %s: after a token, 0.4.0's check (bcrypt) refuses its secret", c.name, c.id)
		}
	}
}
