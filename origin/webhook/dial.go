package webhook

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"syscall"
	"time"
)

// ErrPrivateAddress is the refusal to dial an address that is not on the
// public internet (Public).
var ErrPrivateAddress = errors.New("webhook: refused to dial a private, loopback, link-local or otherwise non-public address")

// nonPublic are the ranges Public refuses beside what netip classifies
// (private, loopback, link-local, unspecified, multicast).
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network" (RFC 791)
	netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT (RFC 6598)
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments (RFC 6890)
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation (RFC 5737)
	netip.MustParsePrefix("192.88.99.0/24"),  // 6to4 relay anycast (RFC 7526, deprecated): relays to the IPv4 inside
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking (RFC 2544)
	netip.MustParsePrefix("198.51.100.0/24"), // documentation
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and the broadcast address
	netip.MustParsePrefix("::/96"),           // IPv4-compatible (RFC 4291, deprecated): ::a00:1 is 10.0.0.1
	netip.MustParsePrefix("64:ff9b::/96"),    // NAT64 (RFC 6052): reaches the IPv4 inside
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use NAT64 (RFC 8215)
	netip.MustParsePrefix("2001:db8::/32"),   // documentation (RFC 3849)
	netip.MustParsePrefix("2002::/16"),       // 6to4 (RFC 3056): reaches the IPv4 inside
	netip.MustParsePrefix("2001::/32"),       // Teredo (RFC 4380)
}

// Public reports whether a webhook may be sent to addr: not private
// (10/8, 172.16/12, 192.168/16, fc00::/7), loopback, link-local
// (169.254/16, fe80::/10), unspecified, multicast, nor in the other
// special ranges of nonPublic, which holds every IPv6 range whose
// addresses embed an IPv4 address a gateway or relay would reach
// (IPv4-compatible ::/96, NAT64, 6to4, Teredo), whatever that address.
// An IPv4-mapped IPv6 address (::ffff:10.0.0.1) is judged as the IPv4
// address it maps.
func Public(addr netip.Addr) bool {
	addr = addr.Unmap()
	if !addr.IsValid() || addr.IsPrivate() || addr.IsLoopback() || addr.IsLinkLocalUnicast() ||
		addr.IsLinkLocalMulticast() || addr.IsInterfaceLocalMulticast() || addr.IsMulticast() || addr.IsUnspecified() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(addr) {
			return false
		}
	}
	return true
}

// control is the dialer's Control: it runs for each address the dialer
// connects to, after DNS and before the connection, so the address
// checked is the address dialled (a DNS answer cannot change in between).
func control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %s", ErrPrivateAddress, address)
	}
	if !Public(ap.Addr()) {
		return fmt.Errorf("%w: %s", ErrPrivateAddress, ap.Addr())
	}
	return nil
}

// Timeouts of one attempt: the whole of it, the connection and the TLS
// handshake within it.
const (
	AttemptTimeout = 10 * time.Second
	dialTimeout    = 5 * time.Second
)

// maxIdle bounds the connections kept open between attempts.
const maxIdle = 64

// newClient is the HTTP client deliveries are sent with: no proxy (a
// proxy would dial for us, unchecked), no redirect followed (a 3xx is an
// answer, and not 2xx), the whole attempt within AttemptTimeout, and,
// unless allowPrivate, every address checked by control.
func newClient(allowPrivate bool, tlsConfig *tls.Config) *http.Client {
	d := &net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		d.Control = control
	}
	t := &http.Transport{
		Proxy:                 nil,
		DialContext:           d.DialContext,
		TLSHandshakeTimeout:   dialTimeout,
		ResponseHeaderTimeout: AttemptTimeout,
		MaxIdleConns:          maxIdle,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
		DisableCompression:    true,
	}
	if tlsConfig != nil {
		t.TLSClientConfig = tlsConfig.Clone()
	}
	return &http.Client{
		Transport: t,
		Timeout:   AttemptTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// maxURL bounds an endpoint's URL.
const maxURL = 2048

// CheckURL checks an endpoint's URL when it is registered: absolute,
// https (http too under allowPrivate), a host, no user info or fragment,
// at most maxURL bytes, and a literal IP address only when Public (or
// under allowPrivate). A name is checked when it is dialled (control).
func CheckURL(raw string, allowPrivate bool) error {
	if len(raw) > maxURL {
		return fmt.Errorf("the url is longer than %d bytes", maxURL)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("the url does not parse")
	}
	switch {
	case u.Scheme != "https" && !(allowPrivate && u.Scheme == "http"):
		return errors.New("the url must be https")
	case u.Host == "" || u.Hostname() == "":
		return errors.New("the url has no host")
	case u.User != nil:
		return errors.New("the url may not hold user info")
	case u.Fragment != "" || u.RawFragment != "":
		return errors.New("the url may not hold a fragment")
	}
	if a, err := netip.ParseAddr(u.Hostname()); err == nil && !allowPrivate && !Public(a) {
		return errors.New("the url names a private, loopback, link-local or otherwise non-public address")
	}
	return nil
}
