package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lectern-api/lectern/origin/idp"
	"github.com/lectern-api/lectern/origin/wiring"
	"github.com/lectern-api/lectern/shared/scope"
)

// The token rows (issue #36 point 5, issue #38 point 3), client_credentials
// tokens per second from the identity provider over loopback, each a
// ratio to (a) of the same run:
//
//	(t1) a known client: -clients connections asking for tokens of one
//	     client again and again (a scenario of the throughput rounds)
//	(t2) new clients, registered as Config.CreateClient registers them
//	     (the keyed hash): every request the first of a client never
//	     seen before, -clients at once, -runs runs of up to -time
//	(t3) new clients registered with a bcrypt hash (idp.CreateClient, the
//	     form release 0.4.0 stored): every request the first of its
//	     client, which costs one bcrypt comparison (then the hash is
//	     upgraded); 503s (the bcrypt gate full) are counted, not tokens
//
// Goal (issue #38): ≥ 2,000 tokens a second for a known client.

// tokenForm is the body of every token request, scope content.read.
var tokenForm = url.Values{"grant_type": {"client_credentials"}, "scope": {scope.Full(scope.ContentRead)}}.Encode()

// tokenSetups are the setups of (t1); (t2) and (t3) run after the
// rounds, as (t1)'s after.
func (tb *throughputBench) tokenSetups() []func() (*scenario, error) {
	return []func() (*scenario, error){tb.knownClientTokens}
}

func (tb *throughputBench) knownClientTokens() (*scenario, error) {
	id, secret, err := keyedClient(tb.ctx, tb.st)
	if err != nil {
		return nil, err
	}
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(id)+":"+url.QueryEscape(secret)))
	s := &scenario{target: &target{id: "t1", name: "client_credentials token, a known client (POST /oauth2/token)",
		url: tb.st.IdPURL + "/oauth2/token", method: "POST", body: tokenForm, want: 200,
		header: func(int) http.Header {
			return http.Header{"Authorization": {basic}, "Content-Type": {"application/x-www-form-urlencoded"}}
		}}}
	var extra []row
	var extraRates []float64
	s.after = func() error {
		for _, nc := range []struct {
			id, name string
			pool     int
			register func() (string, string, error)
		}{
			{"t2", "client_credentials token, a new client each (keyed hash)", 6000,
				func() (string, string, error) { return keyedClient(tb.ctx, tb.st) }},
			{"t3", "client_credentials token, a new client each (bcrypt hash, as 0.4.0 stored)", 60,
				func() (string, string, error) { return bcryptClient(tb.ctx, tb.st) }},
		} {
			r, rate, err := tb.newClientTokens(nc.id, nc.name, nc.pool, nc.register)
			if err != nil {
				return err
			}
			extra, extraRates = append(extra, r), append(extraRates, rate)
		}
		return nil
	}
	s.goal = &goal{text: "≥ 2,000/s", met: func(float64) bool { m, _ := s.median(); return m.rate() >= 2000 }}
	s.rows = func(main row) []row {
		m, _ := s.median()
		for i := range extra {
			extra[i].ratio = fmt.Sprintf("%.2f×", extraRates[i]/tb.baseRate)
		}
		main.result = fmt.Sprintf("%.0f tokens/s", m.rate())
		return append([]row{main}, extra...)
	}
	return s, nil
}

// keyedClient registers a client of the bench org as the admin API's
// Config.CreateClient does.
func keyedClient(ctx context.Context, st *stack) (string, string, error) {
	cfg := wiring.Deployment{Secret: []byte(st.Secret)}.IdP(st.store, time.Now, nil)
	return cfg.CreateClient(ctx, benchOrg, []string{scope.ContentRead}, []string{"client_credentials"}, nil)
}

// bcryptClient registers a client of the bench org with a bcrypt hash.
func bcryptClient(ctx context.Context, st *stack) (string, string, error) {
	return idp.CreateClient(ctx, st.store, time.Now(), benchOrg, []string{scope.ContentRead}, []string{"client_credentials"}, nil)
}

// newClientTokens measures one row of new clients: -runs runs, each of
// pool clients registered beforehand and asked for one token each by
// -clients workers, until the pool is spent or -time passes.
func (tb *throughputBench) newClientTokens(id, name string, pool int, register func() (string, string, error)) (row, float64, error) {
	type cred struct{ id, secret string }
	var rates []float64
	var tokens, refused int64
	for run := range tb.o.runs {
		tb.progress("(%s) registering %d clients, run %d/%d", id, pool, run+1, tb.o.runs)
		creds := make([]cred, pool)
		for i := range creds {
			var err error
			if creds[i].id, creds[i].secret, err = register(); err != nil {
				return row{}, 0, fmt.Errorf("(%s) register: %w", id, err)
			}
		}
		tb.progress("(%s) %s, run %d/%d", id, name, run+1, tb.o.runs)
		hc := &http.Client{Transport: newTransport(tb.o.clients)}
		var next, ok, busy atomic.Int64
		var firstErr error
		var once sync.Once
		start := time.Now()
		deadline := start.Add(tb.o.time)
		var wg sync.WaitGroup
		for range tb.o.clients {
			wg.Go(func() {
				for time.Now().Before(deadline) && tb.ctx.Err() == nil {
					i := next.Add(1) - 1
					if i >= int64(len(creds)) {
						return
					}
					form := tokenForm + "&client_id=" + url.QueryEscape(creds[i].id) + "&client_secret=" + url.QueryEscape(creds[i].secret)
					status, _, b, err := get(tb.ctx, hc, "POST", tb.st.IdPURL+"/oauth2/token",
						http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, strings.NewReader(form))
					switch {
					case err != nil:
						once.Do(func() { firstErr = err })
						return
					case status == 200:
						ok.Add(1)
					case status == 503:
						busy.Add(1)
					default:
						once.Do(func() { firstErr = fmt.Errorf("(%s) token: status %d: %.300s", id, status, b) })
						return
					}
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		if firstErr != nil {
			return row{}, 0, firstErr
		}
		rates = append(rates, float64(ok.Load())/elapsed.Seconds())
		tokens += ok.Load()
		refused += busy.Load()
	}
	med := median(rates)
	var all string
	for _, r := range rates {
		all += fmt.Sprintf(" %.0f", r)
	}
	return row{id: id, what: name, result: fmt.Sprintf("%.0f tokens/s", med),
		detail: fmt.Sprintf("runs%s; %d tokens, %d refused 503 (bcrypt gate full); %d clients at once", all, tokens, refused, tb.o.clients)}, med, nil
}
