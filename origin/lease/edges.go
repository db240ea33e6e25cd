package lease

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	wire "github.com/lectern-api/lectern/shared/lease"
)

// The edge hosts the origin pushes revokes to (LECTERN_EDGE_URLS;
// docs/operations.md, "Edge leases"). A lease request names the URL its
// edge host takes pushes at, and the origin later POSTs signed pushes
// there: were any URL accepted, whoever could have a lease request signed
// would have the origin POST to an address of their choosing (its own
// admin API, a private service). So a revoke URL must be exactly the
// revoke endpoint of a listed edge host, <base>/internal/revoke, when the
// lease is asked for (the lease endpoint answers 400 otherwise) and again
// when a push is made (a lease stored under another list, before a
// restart, is never called: it is waited for as a lease without a revoke
// URL). With no list, no push is made at all. Redirects are never
// followed either (NewClient).
//
// Comparison is on a canonical form: the scheme, the host in lower case
// (a name is compared as written, never resolved: localhost is not
// 127.0.0.1), and the port as a number, the scheme's default port (80 for
// http, 443 for https) being the same as none. So http://Edge-1:80 and
// http://edge-1 are one edge host; http://edge-1:8787 is another.

// EdgesSetting is the name of the setting that lists the edge hosts.
const EdgesSetting = "LECTERN_EDGE_URLS"

// ParseEdges parses the value of LECTERN_EDGE_URLS: a comma-separated list
// of the edge hosts' base URLs, each http or https with a host and an
// optional port, no path but "/", and no query, fragment or userinfo.
// Spaces around an entry are ignored; an empty value (or only spaces) is
// no edge host, but an empty entry is an error. It returns the entries in
// their canonical form (a trailing slash dropped, the host in lower case,
// a default port left out), in order, without duplicates.
func ParseEdges(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []string
	for i, raw := range strings.Split(s, ",") {
		e := strings.TrimSpace(raw)
		base, err := EdgeBase(e)
		if err != nil {
			return nil, fmt.Errorf("entry %d %q: %w", i+1, e, err)
		}
		if !slices.Contains(out, base) {
			out = append(out, base)
		}
	}
	return out, nil
}

// EdgeBase is the canonical form of an edge host's base URL e (one entry
// of LECTERN_EDGE_URLS), or why e is not one.
func EdgeBase(e string) (string, error) {
	if e == "" {
		return "", errors.New("empty (two commas in a row, or one at the end?)")
	}
	if strings.ContainsAny(e, "?#") {
		return "", errors.New("a query or fragment: want the base URL alone")
	}
	p, err := url.Parse(e)
	if err != nil {
		return "", fmt.Errorf("not a URL: %w", err)
	}
	switch {
	case p.Scheme != "http" && p.Scheme != "https":
		return "", errors.New("want an http:// or https:// URL")
	case p.User != nil || strings.Contains(e, "@"):
		return "", errors.New("userinfo (user@ or user:password@): the edge host's URL carries no credentials")
	case p.Opaque != "" || p.Host == "":
		return "", errors.New("no host: want scheme://host[:port]")
	case p.Path != "" && p.Path != "/" || p.RawPath != "":
		return "", fmt.Errorf("a path: want the base URL alone (the revoke URL is it followed by %s)", wire.RevokePath)
	}
	return canonical(p)
}

// canonical is the scheme and host[:port] of p in their canonical form
// (the file's comment), or why p's host or port is not acceptable.
func canonical(p *url.URL) (string, error) {
	host, port := p.Hostname(), p.Port()
	if host == "" {
		return "", errors.New("no host: want scheme://host[:port]")
	}
	if strings.HasSuffix(p.Host, ":") {
		return "", errors.New("an empty port")
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("port %q: want 1 to 65535", port)
		}
		port = strconv.Itoa(n)
		if port == "80" && p.Scheme == "http" || port == "443" && p.Scheme == "https" {
			port = ""
		}
	}
	host = strings.ToLower(host)
	if port != "" {
		return p.Scheme + "://" + net.JoinHostPort(host, port), nil
	}
	if strings.Contains(host, ":") { // an IPv6 address
		host = "[" + host + "]"
	}
	return p.Scheme + "://" + host, nil
}

// revokeBase is the canonical base of revoke URL u: u must be exactly
// <base>/internal/revoke, with no query, fragment or userinfo (nothing but
// the path may follow the host, nor be escaped in it).
func revokeBase(u string) (string, bool) {
	if strings.ContainsAny(u, "?#@") {
		return "", false
	}
	p, err := url.Parse(u)
	if err != nil || p.Scheme != "http" && p.Scheme != "https" || p.Opaque != "" || p.User != nil ||
		p.RawQuery != "" || p.ForceQuery || p.Fragment != "" || p.Path != wire.RevokePath || p.EscapedPath() != wire.RevokePath {
		return "", false
	}
	base, err := canonical(p)
	return base, err == nil
}

// AllowsRevokeURL reports whether u may be the revoke URL of a lease: ""
// (the edge host takes no push), or the revoke endpoint of an edge host
// listed in Config.Edges (LECTERN_EDGE_URLS), <base>/internal/revoke,
// compared in canonical form (the file's comment). With no edge host
// listed, only "" is.
func (m *Manager) AllowsRevokeURL(u string) bool {
	if u == "" {
		return true
	}
	if len(m.edges) == 0 {
		return false
	}
	base, ok := revokeBase(u)
	return ok && m.edges[base]
}

// edgeSet is the canonical form of each of edges; an entry that is not a
// base URL is left out and logged (ParseEdges refuses it at start, so
// only a caller that built Config itself can pass one).
func (m *Manager) edgeSet(edges []string) map[string]bool {
	set := make(map[string]bool, len(edges))
	for _, e := range edges {
		base, err := EdgeBase(e)
		if err != nil {
			m.cfg.Logger.Error("lease: an edge host that is not a base URL is left out: no push goes to it", "edge", e, "err", err)
			continue
		}
		set[base] = true
	}
	return set
}
