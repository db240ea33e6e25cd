package webhook

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
)

func TestPublic(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1": false, "127.8.9.10": false, "::1": false, // loopback
		"10.0.0.1": false, "10.255.255.254": false, "172.16.0.1": false, "192.168.1.1": false, // private
		"169.254.169.254": false, "fe80::1": false, // link-local (the cloud metadata address)
		"fc00::1": false, "fd12:3456::1": false, // unique local, fc00::/7
		"0.0.0.0": false, "::": false, // unspecified
		"::ffff:10.0.0.1": false, "::ffff:127.0.0.1": false, "::ffff:169.254.169.254": false, // IPv4-mapped
		"100.64.0.1": false, "224.0.0.1": false, "255.255.255.255": false, "64:ff9b::a00:1": false,
		"::a00:1": false, "::7f00:1": false, "::a9fe:a9fe": false, "::808:808": false, // IPv4-compatible, ::/96
		"192.88.99.1": false, "192.88.99.255": false, // 6to4 relay anycast
		"64:ff9b::7f00:1": false, "64:ff9b::a9fe:a9fe": false, "64:ff9b::c0a8:101": false, // NAT64 of private IPv4
		"2002:a00:1::1": false, "2002:7f00:1::": false, "2002:c0a8:101::1": false, // 6to4 of private IPv4
		"2001:0:a00:1::1": false,                      // Teredo
		"192.88.98.1":     true, "192.88.100.1": true, // beside it
		"8.8.8.8": true, "1.1.1.1": true, "2606:4700:4700::1111": true, "::ffff:8.8.8.8": true,
	} {
		if got := Public(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Public(%s) = %v, want %v", addr, got, want)
		}
	}
}

// TestRefusedAtDialTime: the delivery client refuses to connect to each
// non-public address, in the dialer's Control (after DNS, before the
// connection): the error is ErrPrivateAddress, whether the URL names the
// address or a name that resolves to it (localhost), and a live server
// on loopback receives nothing. Under AllowPrivate the same server is
// reached.
func TestRefusedAtDialTime(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	c := newClient(false, nil)
	for _, u := range []string{
		"https://localhost:" + port + "/", // a name: resolved, then refused
		srv.URL + "/",
		"https://10.0.0.1/", "https://10.1.2.3:8443/", "https://169.254.169.254/latest/meta-data/",
		"https://[::1]:" + port + "/", "https://[fc00::1]/", "https://[fd00::53]/",
		"https://[::ffff:10.0.0.1]/", "https://[::ffff:127.0.0.1]:" + port + "/",
		"https://0.0.0.0:" + port + "/", "https://192.168.0.1/",
	} {
		resp, err := c.Get(u)
		if err == nil {
			resp.Body.Close()
			t.Errorf("GET %s: answered %d, want refused", u, resp.StatusCode)
			continue
		}
		if !errors.Is(err, ErrPrivateAddress) {
			t.Errorf("GET %s: %v, want ErrPrivateAddress", u, err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the loopback server got %d requests", n)
	}

	allowed := newClient(true, nil)
	allowed.Transport.(*http.Transport).TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig
	resp, err := allowed.Get(srv.URL)
	if err != nil {
		t.Fatalf("under AllowPrivate: %v", err)
	}
	resp.Body.Close()
	if hits.Load() != 1 {
		t.Error("under AllowPrivate the loopback server was not reached")
	}
}

// proxyChild makes the test binary run TestNoProxyFromEnvironment's
// requests (net/http reads the proxy variables once a process).
const proxyChild = "LECTERN_WEBHOOK_PROXY_CHILD"

// TestNoProxyFromEnvironment: with HTTPS_PROXY and HTTP_PROXY set, the
// delivery client (under AllowPrivate too) still dials the endpoint
// itself: the proxy, which would dial for it unchecked, gets nothing. A
// child process makes the requests, its environment set before net/http
// first reads it.
func TestNoProxyFromEnvironment(t *testing.T) {
	if os.Getenv(proxyChild) == "1" {
		for _, allow := range []bool{false, true} {
			for _, u := range []string{"https://hooks.invalid/", "http://hooks.invalid/"} {
				resp, err := newClient(allow, nil).Post(u, "application/json", strings.NewReader("{}"))
				if err == nil {
					resp.Body.Close()
					t.Errorf("POST %s (allow private %v): answered %d, want no such host", u, allow, resp.StatusCode)
				}
			}
		}
		return
	}
	var hits atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer proxy.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestNoProxyFromEnvironment$")
	cmd.Env = append(os.Environ(), proxyChild+"=1", "HTTPS_PROXY="+proxy.URL, "HTTP_PROXY="+proxy.URL,
		"https_proxy="+proxy.URL, "http_proxy="+proxy.URL, "NO_PROXY=", "no_proxy=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("the child: %v\n%s", err, out)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the proxy in the environment got %d requests, want none", n)
	}
}

// TestNoRedirectFollowed: a 3xx is the attempt's answer; its Location is
// not requested.
func TestNoRedirectFollowed(t *testing.T) {
	var target atomic.Int32
	dst := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { target.Add(1) }))
	defer dst.Close()
	src := httptest.NewServer(http.RedirectHandler(dst.URL, http.StatusTemporaryRedirect))
	defer src.Close()
	resp, err := newClient(true, nil).Post(src.URL, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTemporaryRedirect || target.Load() != 0 {
		t.Errorf("status %d, redirect target hit %d times; want 307 and none", resp.StatusCode, target.Load())
	}
}

func TestCheckURL(t *testing.T) {
	for u, want := range map[string]bool{
		"https://hooks.example.com/lectern":                true,
		"https://hooks.example.com:8443/x?y":               true,
		"http://hooks.example.com/":                        false,
		"https://10.0.0.1/":                                false,
		"https://[::1]/":                                   false,
		"https://user:pw@hooks.example.com/":               false,
		"https://hooks.example.com/#frag":                  false,
		"ftp://hooks.example.com/":                         false,
		"/relative":                                        false,
		"https:///nohost":                                  false,
		"https://" + strings.Repeat("a", maxURL) + ".com/": false,
	} {
		if err := CheckURL(u, false); (err == nil) != want {
			t.Errorf("CheckURL(%q) = %v, want ok %v", u, err, want)
		}
	}
	if err := CheckURL("http://127.0.0.1:9000/", true); err != nil {
		t.Errorf("under AllowPrivate, http on loopback: %v", err)
	}
}

func TestSealOpen(t *testing.T) {
	k1, k2 := make([]byte, 32), make([]byte, 32)
	k2[0] = 1
	sealed, err := seal(k1, "wh_1", []byte("key"))
	if err != nil {
		t.Fatal(err)
	}
	if got, i, err := open([][]byte{k2, k1}, "wh_1", sealed); err != nil || string(got) != "key" || i != 1 {
		t.Errorf("open with the accepted key = %q, %d, %v", got, i, err)
	}
	if _, _, err := open([][]byte{k2}, "wh_1", sealed); err == nil {
		t.Error("another key opens the secret")
	}
	if _, _, err := open([][]byte{k1}, "wh_2", sealed); err == nil {
		t.Error("the secret opens as another endpoint's")
	}
}
