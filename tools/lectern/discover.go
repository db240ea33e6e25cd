package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// clientConfig is what the command is told: the API's base URL, the
// organisation's client credentials, and the bounds of its exchanges.
type clientConfig struct {
	URL, ClientID, Secret string
	Limits                limits
}

// plainClient is the client of the calls that take no credential:
// discovery and the download links. It sends no Authorization header to
// any host, follows redirects only to https (http on loopback), and bounds
// each answer to the default limits until tokenClient sets the
// configured ones.
func plainClient() *http.Client {
	c := &http.Client{}
	setPlain(c, defaultLimits)
	return c
}

// setPlain makes c a plain client of the bounds l.
func setPlain(c *http.Client, l limits) {
	c.Transport = &guard{base: l.transport(), max: l.MaxDownload, bound: "the -max-download bound",
		idle: l.Idle, connect: l.Connect, header: l.Header}
	c.CheckRedirect = redirects("")
}

// tokenClient is an HTTP client that sends the organisation's token to the
// API's origin (LECTERN_URL's scheme, host and port) and nowhere else, and
// gets a new one before it expires. The token endpoint is found from the
// API itself: a request without a token is answered 401 with a challenge
// naming the protected resource metadata (RFC 9728), which names the
// authorization server, whose metadata (RFC 8414) names the token
// endpoint; the client secret goes there and nowhere else. No client
// follows a redirect off the origin its credential belongs to, and each
// JSON answer is bounded (maxJSON). It sets plain's bounds to cfg's.
func tokenClient(ctx context.Context, cfg clientConfig, plain *http.Client, scopes []string) (*http.Client, error) {
	l := cfg.Limits.orDefault()
	setPlain(plain, l)
	base := strings.TrimSuffix(cfg.URL, "/")
	tokenURL, err := discoverTokenURL(ctx, plain, base)
	if err != nil {
		return nil, fmt.Errorf("find the token endpoint: %w", err)
	}
	jsonGuard := func(origin string) *guard {
		return &guard{base: l.transport(), creds: []string{origin}, max: maxJSON, bound: "the bound of a JSON answer",
			idle: l.Idle, connect: l.Connect, header: l.Header}
	}
	tokenOrigin, apiOrigin := originOf(tokenURL), originOf(base)
	secretClient := &http.Client{Transport: jsonGuard(tokenOrigin), CheckRedirect: redirects(tokenOrigin)}
	cc := clientcredentials.Config{ClientID: cfg.ClientID, ClientSecret: cfg.Secret, TokenURL: tokenURL,
		Scopes: scopes, AuthStyle: oauth2.AuthStyleInHeader}
	ts := cc.TokenSource(context.WithValue(ctx, oauth2.HTTPClient, secretClient))
	if _, err := ts.Token(); err != nil {
		return nil, fmt.Errorf("get a token at %s: %w", tokenURL, err)
	}
	// oauth2.NewClient's transport sets the token on every request,
	// redirects to other hosts included: the guard under it refuses any
	// but the API's origin, and the redirect policy says why first.
	return &http.Client{Transport: &oauth2.Transport{Source: ts, Base: jsonGuard(apiOrigin)}, CheckRedirect: redirects(apiOrigin)}, nil
}

// discoverTokenURL finds the token endpoint of the API at base. Every
// URL on the way must be https, or http on a loopback host: the client
// secret goes to the endpoint found.
func discoverTokenURL(ctx context.Context, c *http.Client, base string) (string, error) {
	if err := secureURL(base); err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/v1/license", nil)
	if err != nil {
		return "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		return "", fmt.Errorf("GET %s/v1/license without a token answered %d, not 401 with a challenge", base, resp.StatusCode)
	}
	rm := challengeParam(resp.Header.Get("WWW-Authenticate"), "resource_metadata")
	if rm == "" {
		return "", fmt.Errorf("the 401 challenge %q names no resource_metadata", resp.Header.Get("WWW-Authenticate"))
	}
	if err := secureURL(rm); err != nil {
		return "", err
	}
	var meta struct {
		AuthorizationServers []string `json:"authorization_servers"`
	}
	if err := getJSON(ctx, c, rm, &meta); err != nil {
		return "", err
	}
	if len(meta.AuthorizationServers) == 0 {
		return "", fmt.Errorf("%s names no authorization server", rm)
	}
	as := meta.AuthorizationServers[0]
	if err := secureURL(as); err != nil {
		return "", err
	}
	var asMeta struct {
		Issuer        string `json:"issuer"`
		TokenEndpoint string `json:"token_endpoint"`
	}
	if err := getJSON(ctx, c, wellKnown(as), &asMeta); err != nil {
		return "", err
	}
	if asMeta.TokenEndpoint == "" || strings.TrimSuffix(asMeta.Issuer, "/") != strings.TrimSuffix(as, "/") {
		return "", fmt.Errorf("the metadata of %s names issuer %q and token endpoint %q", as, asMeta.Issuer, asMeta.TokenEndpoint)
	}
	if err := secureURL(asMeta.TokenEndpoint); err != nil {
		return "", err
	}
	return asMeta.TokenEndpoint, nil
}

// secureURL refuses a URL the client secret or its discovery should not
// go through: anything but https, or http to a loopback host.
func secureURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%q is not an absolute URL", raw)
	}
	if err := secure(u); err != nil {
		return fmt.Errorf("%w: the token's discovery and endpoint must be https (http only on a loopback host)", err)
	}
	return nil
}

// wellKnown is the RFC 8414 metadata URL of the issuer iss: the well-known
// path goes between the host and the issuer's own path.
func wellKnown(iss string) string {
	u, err := url.Parse(iss)
	if err != nil {
		return strings.TrimSuffix(iss, "/") + "/.well-known/oauth-authorization-server"
	}
	u.Path = "/.well-known/oauth-authorization-server" + strings.TrimSuffix(u.Path, "/")
	return u.String()
}

// challengeParam reads the auth-param name of a WWW-Authenticate value
// (RFC 9110 §11.2), quoted or not; "" when absent.
func challengeParam(h, name string) string {
	for h != "" {
		i := strings.Index(h, name+"=")
		if i < 0 {
			return ""
		}
		if i > 0 && h[i-1] != ' ' && h[i-1] != ',' {
			h = h[i+len(name)+1:]
			continue
		}
		v := h[i+len(name)+1:]
		if strings.HasPrefix(v, `"`) {
			var b strings.Builder
			for j := 1; j < len(v); j++ {
				switch v[j] {
				case '\\':
					if j+1 < len(v) {
						j++
						b.WriteByte(v[j])
					}
				case '"':
					return b.String()
				default:
					b.WriteByte(v[j])
				}
			}
			return ""
		}
		if j := strings.IndexAny(v, ", "); j >= 0 {
			v = v[:j]
		}
		return v
	}
	return ""
}

// maxMetadata is the most bytes of a discovery document.
const maxMetadata = 1 << 20

// getJSON GETs u and decodes its 200 JSON body into v.
func getJSON(ctx context.Context, c *http.Client, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxMetadata+1))
	if err != nil {
		return err
	}
	if len(b) > maxMetadata {
		return fmt.Errorf("GET %s: the metadata is over %s", u, sizeOf(maxMetadata))
	}
	return json.Unmarshal(b, v)
}
