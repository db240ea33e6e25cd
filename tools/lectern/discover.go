package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// clientConfig is what the command is told: the API's base URL and the
// organisation's client credentials.
type clientConfig struct {
	URL, ClientID, Secret string
}

// plainClient is the client of the calls that take no token: discovery and
// the download links. Its timeouts bound a server that stops answering.
func plainClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		MaxIdleConnsPerHost:   8,
		ResponseHeaderTimeout: 60 * time.Second,
		IdleConnTimeout:       90 * time.Second,
	}}
}

// tokenClient is an HTTP client that sends the organisation's token with
// every request and gets a new one before it expires. The token endpoint
// is found from the API itself: a request without a token is answered 401
// with a challenge naming the protected resource metadata (RFC 9728),
// which names the authorization server, whose metadata (RFC 8414) names
// the token endpoint.
func tokenClient(ctx context.Context, cfg clientConfig, plain *http.Client, scopes []string) (*http.Client, error) {
	tokenURL, err := discoverTokenURL(ctx, plain, strings.TrimSuffix(cfg.URL, "/"))
	if err != nil {
		return nil, fmt.Errorf("find the token endpoint: %w", err)
	}
	cc := clientcredentials.Config{ClientID: cfg.ClientID, ClientSecret: cfg.Secret, TokenURL: tokenURL,
		Scopes: scopes, AuthStyle: oauth2.AuthStyleInHeader}
	ctx = context.WithValue(ctx, oauth2.HTTPClient, plain)
	ts := cc.TokenSource(ctx)
	if _, err := ts.Token(); err != nil {
		return nil, fmt.Errorf("get a token at %s: %w", tokenURL, err)
	}
	return oauth2.NewClient(ctx, ts), nil
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
	if u.Scheme == "https" {
		return nil
	}
	if ip := net.ParseIP(u.Hostname()); u.Scheme == "http" && (u.Hostname() == "localhost" || ip != nil && ip.IsLoopback()) {
		return nil
	}
	return fmt.Errorf("%s: the token's discovery and endpoint must be https (http only on a loopback host)", raw)
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
	return json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(v)
}
