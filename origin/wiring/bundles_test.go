package wiring

import (
	"net"
	"path/filepath"
	"testing"
)

// Two origins started from one folder take two bundle directories by
// default, named by their ports (the README's several-origins recipe).
func TestBundleDirOf(t *testing.T) {
	a, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	_, port, _ := net.SplitHostPort(a.Addr().String())
	if got, want := BundleDirOf(a), filepath.Join("var", "bundles-"+port); got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if BundleDirOf(a) == BundleDirOf(b) {
		t.Errorf("two origins share %s", BundleDirOf(a))
	}
}
