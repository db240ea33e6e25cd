package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/idp/idptest"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// adminAPI calls the admin API.
type adminAPI struct {
	url, token string
	client     *http.Client
}

// call sends body (JSON-encoded when not nil) and decodes the answer into
// out; an answer other than 2xx is an error.
func (a *adminAPI) call(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.url+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	resp, err := a.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %d %.300s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// retry calls f until it succeeds or d passes (the origin may be
// restarting), returning its last error.
func retry(d time.Duration, f func() error) error {
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// org is one organisation of the soak, its plan, what it may read, and
// its credentials.
type org struct {
	ID     string
	Grants []string
	Plan   plan
	body   map[string]any // the admin API's create body

	subjects []*corpus.Subject // granted
	lessons  []*corpus.Lesson  // granted
	readSet  []*corpus.Lesson  // the lessons its lesson reads use: at most 40% of lessons (the enumeration alarm)
	other    *corpus.Lesson    // a lesson it is not granted, nil when granted everything

	tokens   oauth2.TokenSource // client_credentials, every content scope
	learners []*learner
}

// learner is a learner of an organisation with a learner token (the dev
// identity provider's authorization_code flow with PKCE).
type learner struct {
	ID  string
	app *oauth2.Config

	mu  sync.Mutex
	tok *oauth2.Token
}

// contentScopes are the client_credentials client's scopes: every content
// scope, and progress.read, so that its token on GET /v1/progress meets
// LEARNER_REQUIRED rather than insufficient_scope.
var contentScopes = []string{"content.read", "content.export", "media.download", "testprep.read", "progress.read"}

// makeOrgs plans n organisations over c: grants cycle through every tier,
// a few tiers, one tier, one subject, two subjects and a tier with a
// subject of another; plans through no caps, low hourly caps (RATE_LIMITED),
// monthly download, export and test-prep quotas (QUOTA_EXCEEDED,
// EXPORT_LIMIT, shortened pages), a monthly calls quota (and no other, so
// that its QUOTA_EXCEEDED names one meter), and moderate caps.
func makeOrgs(c *corpus.Corpus, n int) []*org {
	tiers := make([]string, len(c.Tiers))
	for i, t := range c.Tiers {
		tiers[i] = t.Name
	}
	subj := func(i int) *corpus.Subject { return c.Subjects[i%len(c.Subjects)] }
	orgs := make([]*org, n)
	for i := range orgs {
		o := &org{ID: fmt.Sprintf("soak-%02d", i)}
		j := i / 6
		switch i % 6 {
		case 0:
			o.Grants = tiers
		case 1:
			o.Grants = []string{tiers[j%len(tiers)], tiers[(j+1)%len(tiers)]}
		case 2:
			o.Grants = []string{tiers[j%len(tiers)]}
		case 3:
			o.Grants = []string{subj(j).Ref()}
		case 4:
			a, b := subj(2*j), subj(2*j+len(c.Subjects)/2)
			o.Grants = []string{a.Ref(), b.Ref()}
		case 5:
			s := subj(3 * j)
			t := tiers[(j+1)%len(tiers)]
			if t == s.Tier {
				t = tiers[(j+2)%len(tiers)]
			}
			o.Grants = []string{t, s.Ref()}
		}
		o.body = map[string]any{"orgId": o.ID, "orgName": "Soak " + o.ID, "contentGrants": o.Grants}
		switch i % 5 {
		case 1:
			o.body["rateLimits"] = map[string]any{"callsPerHour": 150, "lessonReadsPerHour": 40, "urlMintsPerHour": 60}
		case 2:
			o.body["quota"] = map[string]any{"downloads": 200, "exports": 8, "testprepitems": 150}
		case 3:
			o.body["quota"] = map[string]any{"calls": 300}
			o.Plan.CallsQuota = true
		case 4:
			o.body["rateLimits"] = map[string]any{"lessonReadsPerHour": 100, "urlMintsPerHour": 200}
			o.body["quota"] = map[string]any{"exports": 30}
		}
		granted := func(s *corpus.Subject) bool {
			for _, g := range o.Grants {
				if g == s.Tier || g == s.Ref() {
					return true
				}
			}
			return false
		}
		for _, s := range c.Subjects {
			if granted(s) {
				o.subjects = append(o.subjects, s)
				o.lessons = append(o.lessons, s.Lessons...)
			} else if o.other == nil && len(s.Lessons) > 0 {
				o.other = s.Lessons[0]
			}
		}
		// Distinct lessons read in a UTC day above 40% of the granted
		// ones suspend the organisation (spec: States and transitions):
		// reads stay within 2/5 of them, spread over its subjects.
		k := len(o.lessons) * 2 / 5
		for x := 0; x < k; x++ {
			o.readSet = append(o.readSet, o.lessons[(x*7919)%len(o.lessons)])
		}
		o.readSet = dedupe(o.readSet)
		orgs[i] = o
	}
	return orgs
}

func dedupe(ls []*corpus.Lesson) []*corpus.Lesson {
	seen := map[*corpus.Lesson]bool{}
	out := ls[:0]
	for _, l := range ls {
		if !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	return out
}

// redirectURI is the learner app's registered redirect; the dev identity
// provider answers the authorization with a 302 to it, never followed.
const redirectURI = "http://127.0.0.1/soak/callback"

// create registers the organisation, a client_credentials client with
// contentScopes and a learner app, and signs learners learners in.
func (o *org) create(ctx context.Context, a *adminAPI, idpURL string, learners int) error {
	if err := a.call(ctx, "POST", "/admin/v1/orgs", o.body, nil); err != nil {
		return err
	}
	var cl struct{ ClientID, ClientSecret string }
	if err := a.call(ctx, "POST", "/admin/v1/orgs/"+o.ID+"/clients", map[string]any{"scopes": contentScopes}, &cl); err != nil {
		return err
	}
	full := make([]string, len(contentScopes))
	for i, s := range contentScopes {
		full[i] = "service-api/" + s
	}
	cc := clientcredentials.Config{ClientID: cl.ClientID, ClientSecret: cl.ClientSecret, TokenURL: idpURL + "/oauth2/token", Scopes: full}
	o.tokens = oauth2.ReuseTokenSource(nil, cc.TokenSource(context.Background()))
	if _, err := o.tokens.Token(); err != nil {
		return fmt.Errorf("%s: client_credentials token: %w", o.ID, err)
	}
	var app struct{ ClientID, ClientSecret string }
	if err := a.call(ctx, "POST", "/admin/v1/orgs/"+o.ID+"/clients", map[string]any{"scopes": []string{"progress.read", "progress.write"},
		"grantTypes": []string{"authorization_code"}, "redirectUris": []string{redirectURI}}, &app); err != nil {
		return err
	}
	for i := range learners {
		l := &learner{ID: fmt.Sprintf("%s-learner-%d", o.ID, i),
			app: idptest.LearnerApp(idpURL, app.ClientID, app.ClientSecret, redirectURI, "progress.read", "progress.write")}
		if _, err := l.token(ctx); err != nil {
			return fmt.Errorf("%s: learner token: %w", l.ID, err)
		}
		o.learners = append(o.learners, l)
	}
	return nil
}

// token is the learner's token, signed in again (idptest.LearnerToken:
// authorize with PKCE S256, login_hint naming the learner, then the code
// exchanged) when it is missing or expires within a minute.
func (l *learner) token(ctx context.Context) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tok != nil && time.Until(l.tok.Expiry) > time.Minute {
		return l.tok.AccessToken, nil
	}
	tok, err := idptest.LearnerToken(ctx, l.app, l.ID)
	if err != nil {
		return "", err
	}
	l.tok = tok
	return tok.AccessToken, nil
}

// meters reads the organisation's meters from the admin API (GET org).
func (a *adminAPI) meters(ctx context.Context, orgID string) (units, error) {
	var o struct {
		Meters struct {
			Month struct{ Calls, Downloads, Exports, Testprepitems int64 }
			Hour  struct{ Calls, Lessonreads, Mints int64 }
		}
	}
	if err := a.call(ctx, "GET", "/admin/v1/orgs/"+orgID, nil, &o); err != nil {
		return units{}, err
	}
	m := o.Meters
	return units{m.Month.Calls, m.Month.Downloads, m.Month.Exports, m.Month.Testprepitems, m.Hour.Calls, m.Hour.Lessonreads, m.Hour.Mints}, nil
}

// ledger reads the organisation's whole export ledger, page by page.
func (a *adminAPI) ledger(ctx context.Context, orgID string) ([]ledgerRow, error) {
	var rows []ledgerRow
	after := int64(0)
	for {
		var page struct {
			Items     []ledgerRow
			NextAfter *int64
		}
		if err := a.call(ctx, "GET", fmt.Sprintf("/admin/v1/orgs/%s/ledger?after=%d&limit=1000", orgID, after), nil, &page); err != nil {
			return nil, err
		}
		rows = append(rows, page.Items...)
		if page.NextAfter == nil {
			return rows, nil
		}
		after = *page.NextAfter
	}
}
