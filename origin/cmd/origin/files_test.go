package main

import (
	"context"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/wiring"
	"github.com/lectern-api/lectern/shared/link"
)

// The origin signs and checks download links with LECTERN_URL_KEYS (the
// second key verifies too), or without it with the key derived from the
// secret; a link lives while the stack's clock, which the admin test
// clock moves, is before its expiry.
func TestURLKeys(t *testing.T) {
	const keys = "new=url-key-new-of-the-test-0123456789abcdef,old=url-key-old-of-the-test-0123456789abcdef"
	dir := t.TempDir()
	writeCorpus(t, dir+"/corpus")
	s := bootStack(t, testEnv(dir, map[string]string{"LECTERN_TEST_CLOCK": "1", "LECTERN_URL_KEYS": keys}), nil)
	defer s.Close()
	old, _ := link.ParseKeys("old=url-key-old-of-the-test-0123456789abcdef")
	secret := link.Derived([]byte("a-test-secret-of-at-least-32-characters"))
	m := s.Content().Lessons[0].Media[0]
	exp := s.Clock().Now().Add(time.Minute).Unix()
	org, err := s.Store().GetOrg(context.Background(), wiring.DemoOrg)
	if err != nil {
		t.Fatal(err)
	}
	sign := func(k link.Keys) string {
		return k.Sign(link.Link{Kind: link.Media, Expires: exp, Row: 1, Media: m.ID, Org: org.ID, Gen: org.Generation})
	}
	r := s.get("GET", sign(old), "")
	if r.status != 200 || int64(len(r.body)) != m.Bytes {
		t.Fatalf("a link of the second key: %d, %d bytes (want %d)", r.status, len(r.body), m.Bytes)
	}
	s.expect(s.get("GET", sign(secret), ""), 404, "NOT_FOUND") // LECTERN_URL_KEYS replaces the derived key
	if code, _ := s.admin("POST", "/admin/v1/clock", `{"advanceSeconds":60}`); code != 200 {
		t.Fatalf("advance the clock: %d", code)
	}
	s.expect(s.get("GET", sign(old), ""), 404, "NOT_FOUND")

	// Without LECTERN_URL_KEYS: the derived key.
	d := newStack(t)
	exp = d.Clock().Now().Add(time.Minute).Unix()
	if org, err = d.Store().GetOrg(context.Background(), wiring.DemoOrg); err != nil {
		t.Fatal(err)
	}
	if r := d.get("HEAD", sign(secret), ""); r.status != 200 {
		t.Errorf("a link of the derived key: %d", r.status)
	}
}
