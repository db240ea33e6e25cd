package wiring

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/lectern-api/lectern/origin/licence"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/shared/id"
	"github.com/lectern-api/lectern/shared/scope"
)

// DemoOrg is the organisation make run creates on a new database.
const DemoOrg = "demo"

// DemoScopes are the scopes of the client the walk-through creates with
// adminctl on a database that has the demo organisation: those lectern
// sync asks for, -media's included (the first client has every scope),
// so the walk-through's lectern sync line runs with either client.
var DemoScopes = []string{scope.ContentRead, scope.ContentExport, scope.MediaDownload}

// Announce prints the addresses served and, under make run (demo:
// LECTERN_DEMO), creates the demo organisation and its client on a new
// database and prints the credentials, the admin token and a curl
// walk-through; on a database that has it, the walk-through creates a
// client with adminctl first. Every shell variable the walk-through uses,
// it sets (origin/cmd/origin's TestWalkThrough). Without demo nothing is
// created and no secret printed: a generated admin token is named by its
// file.
func (o *Origin) Announce(ctx context.Context, stdout io.Writer, demo bool) error {
	fmt.Fprintf(stdout, "\nLectern origin stack\n  API (direct)       %s/v1\n  identity provider  %s\n  admin API          %s\n",
		o.OriginURL, orOff(o.IdPURL), orOff(o.AdminURL))
	switch {
	case o.AdminTokenFile != "" && demo:
		fmt.Fprintf(stdout, "  admin token        %s   (kept in %s; set LECTERN_ADMIN_TOKEN to choose one)\n", o.AdminToken, o.AdminTokenFile)
	case o.AdminTokenFile != "":
		fmt.Fprintf(stdout, "  admin token        kept in %s (readable by this user only)\n", o.AdminTokenFile)
	}
	if !demo {
		return nil
	}
	_, err := o.store.GetOrg(ctx, DemoOrg)
	if errors.Is(err, store.ErrNotFound) {
		org := licence.NewOrg(o.clock.Now())
		org.ID, org.Name, org.Grants = DemoOrg, "Demo Organisation", append([]string(nil), id.Tiers...)
		// ErrConflict: another origin on the database, started at the
		// same time, created it first.
		err = o.store.CreateOrg(ctx, org)
		if err == nil {
			return o.demoClient(ctx, stdout)
		}
	}
	if err != nil && !errors.Is(err, store.ErrConflict) {
		return err
	}
	fmt.Fprintf(stdout, "\nThe demo organisation %q exists: its first client's secret was shown once, when it was created.\n", DemoOrg)
	if o.AdminURL == "" {
		fmt.Fprintf(stdout, "Create a client of it with `adminctl client create %s -scopes %s` on an admin API of the deployment (this origin has none).\n",
			DemoOrg, strings.Join(DemoScopes, ","))
		return nil
	}
	// adminctl prints the answer's JSON pretty-printed.
	token := ""
	if o.AdminTokenFile != "" {
		token = "LECTERN_ADMIN_TOKEN=$(cat " + o.AdminTokenFile + ") "
	} else {
		fmt.Fprintln(stdout, "(adminctl reads LECTERN_ADMIN_TOKEN: export the one this origin was started with.)")
	}
	fmt.Fprintf(stdout, `
Try it with a new client (adminctl client create; its secret is shown once):
  CLIENT=$(%sgo run ./tools/adminctl -addr %s client create %s -scopes %s)
  CLIENT_ID=$(printf '%%s' "$CLIENT" | sed -n 's/.*"clientId": *"\([^"]*\)".*/\1/p')
  CLIENT_SECRET=$(printf '%%s' "$CLIENT" | sed -n 's/.*"clientSecret": *"\([^"]*\)".*/\1/p')
%s%s`, token, o.AdminURL, DemoOrg, strings.Join(DemoScopes, ","), o.tryIt(`"$CLIENT_ID:$CLIENT_SECRET"`),
		o.syncIt(`"$CLIENT_ID"`, `"$CLIENT_SECRET"`))
	return nil
}

// demoClient creates the new demo organisation's client and prints its
// credentials and the walk-through.
func (o *Origin) demoClient(ctx context.Context, stdout io.Writer) error {
	clientID, clientSecret, err := o.clients.CreateClient(ctx, DemoOrg, scope.All,
		[]string{"client_credentials"}, nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, `
Created the demo organisation %q (every tier granted) and its client:
  client id      %s
  client secret  %s   (shown once)

Try it:
%s%s`, DemoOrg, clientID, clientSecret, o.tryIt("'"+clientID+":"+clientSecret+"'"), o.syncIt("'"+clientID+"'", "'"+clientSecret+"'"))
	return nil
}

// tryIt is the walk-through's last lines: a token for the client whose
// credentials (user:password, quoted for the shell) are given, and two
// calls with it.
func (o *Origin) tryIt(credentials string) string {
	return fmt.Sprintf(`  TOKEN=$(curl -s -u %s \
    -d grant_type=client_credentials -d 'scope=service-api/content.read' \
    %s/oauth2/token | sed 's/.*"access_token":"\([^"]*\)".*/\1/')
  curl -s -H "Authorization: Bearer $TOKEN" %s/v1/license
  curl -s -H "Authorization: Bearer $TOKEN" %s/v1/tiers
`, credentials, tokenBase(o.IdPURL, o.issuer), o.OriginURL, o.OriginURL)
}

// syncIt is the walk-through's closing paragraph: lectern sync of every
// granted subject into var/mirror with the client whose id and secret
// (quoted for the shell) are given, through the API's public URL (the
// edge under make run). It follows tryIt after a blank line, so that
// tryIt's lines stay the part a test runs as pasted.
func (o *Origin) syncIt(clientID, clientSecret string) string {
	return fmt.Sprintf(`
Mirror every granted subject with lectern sync (docs/integrating.md, "What lectern sync needs"; add -media for the media assets):
  LECTERN_URL=%s LECTERN_CLIENT_ID=%s LECTERN_CLIENT_SECRET=%s \
    go run ./tools/lectern sync var/mirror
`, o.publicURL, clientID, clientSecret)
}

// orOff is url, or "off" for a listener that is off.
func orOff(url string) string {
	if url == "" {
		return "off"
	}
	return url
}

// tokenBase is where make run's walk-through gets a token: this origin's
// identity provider, or the issuer's when it has none.
func tokenBase(idpURL, issuer string) string {
	if idpURL != "" {
		return idpURL
	}
	return issuer
}
