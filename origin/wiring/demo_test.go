package wiring

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// syncScopes are the scopes lectern sync -media asks its token for
// (tools/lectern).
const syncScopes = "service-api/content.read service-api/content.export service-api/media.download"

// issue #35, point 9: both of make run's clients can run lectern sync
// -media: the demo organisation's first client, and the one the
// walk-through creates with adminctl on a database that has it (before,
// that one had content.read alone, and sync's token request was refused
// invalid_scope). Both walk-throughs end with the lectern sync line.
func TestDemoClientsCanSync(t *testing.T) {
	o := openOrigin(t, nil)
	var first bytes.Buffer
	if err := o.Announce(t.Context(), &first, true); err != nil {
		t.Fatal(err)
	}
	id := regexp.MustCompile(`client id +(\S+)`).FindStringSubmatch(first.String())
	secret := regexp.MustCompile(`client secret +(\S+)`).FindStringSubmatch(first.String())
	if id == nil || secret == nil {
		t.Fatalf("the first start prints no client:\n%s", first.String())
	}
	demoToken(t, o, id[1], secret[1])
	wantSync := "LECTERN_URL=" + o.OriginURL + " LECTERN_CLIENT_ID='" + id[1] + "' LECTERN_CLIENT_SECRET='" + secret[1] + "'"
	if !strings.Contains(first.String(), wantSync) || !strings.Contains(first.String(), "go run ./tools/lectern sync var/mirror") {
		t.Errorf("the first walk-through has no lectern sync line %q:\n%s", wantSync, first.String())
	}

	var second bytes.Buffer
	if err := o.Announce(t.Context(), &second, true); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`adminctl -addr \S+ client create demo -scopes (\S+)\)`).FindStringSubmatch(second.String())
	if m == nil {
		t.Fatalf("the walk-through on an existing database creates no client with adminctl:\n%s", second.String())
	}
	// The client adminctl would create, by the admin API it calls.
	body, _ := json.Marshal(map[string]any{"scopes": strings.Split(m[1], ",")})
	req, _ := http.NewRequestWithContext(t.Context(), "POST", o.AdminURL+"/admin/v1/orgs/demo/clients", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+o.AdminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var c struct{ ClientID, ClientSecret string }
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || resp.StatusCode != 201 && resp.StatusCode != 200 {
		t.Fatalf("client create -scopes %s: %d, %v", m[1], resp.StatusCode, err)
	}
	demoToken(t, o, c.ClientID, c.ClientSecret)
	if !strings.Contains(second.String(), `LECTERN_CLIENT_ID="$CLIENT_ID" LECTERN_CLIENT_SECRET="$CLIENT_SECRET"`) {
		t.Errorf("the second walk-through has no lectern sync line:\n%s", second.String())
	}
}

// demoToken fails unless the client gets a token with syncScopes.
func demoToken(t *testing.T, o *Origin, id, secret string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "POST", o.IdPURL+"/oauth2/token",
		strings.NewReader(url.Values{"grant_type": {"client_credentials"}, "scope": {syncScopes}}.Encode()))
	req.SetBasicAuth(id, secret)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(b), syncScopes) {
		t.Errorf("client %s: a token for %q: %d %s", id, syncScopes, resp.StatusCode, b)
	}
}
