package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/admin"
	"github.com/lectern-api/lectern/origin/clock"
	"github.com/lectern-api/lectern/origin/store/sqlitestore"
	"github.com/lectern-api/lectern/origin/webhook"
)

// TestWebhookCommands: webhook add, list, rotate, deliveries and delete
// against the real admin API over a real listener.
func TestWebhookCommands(t *testing.T) {
	st, err := sqlitestore.New(context.Background(), filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	wall := time.Date(2030, 3, 10, 12, 0, 0, 0, time.UTC)
	clk := clock.New(func() time.Time { return wall })
	srv := httptest.NewServer(admin.Handler(admin.Config{Token: token, Store: st, Clock: clk,
		Webhooks: webhook.New(webhook.Config{Store: st, Key: make([]byte, 32), Now: clk.Now})}))
	t.Cleanup(srv.Close)
	vars := map[string]string{"LECTERN_ADMIN_ADDR": strings.TrimPrefix(srv.URL, "http://"), "LECTERN_ADMIN_TOKEN": token}
	env := func(k string) string { return vars[k] }

	if _, _, err := adminctl(t, env, "org", "create", "-id", "acme"); err != nil {
		t.Fatal(err)
	}
	out, text, err := adminctl(t, env, "webhook", "add", "acme", "https://hooks.example.com/lectern")
	if err != nil {
		t.Fatal(err)
	}
	id, _ := out["id"].(string)
	if !regexp.MustCompile(`^whsec_[A-Za-z0-9+/]{43}=$`).MatchString(out["secret"].(string)) || !strings.HasPrefix(id, "wh_") ||
		len(out["events"].([]any)) != len(webhook.Types) {
		t.Errorf("webhook add: %s", text)
	}
	if out, text, err = adminctl(t, env, "webhook", "add", "acme", "https://hooks.example.com/2", "-events", "quota.threshold"); err != nil ||
		len(out["events"].([]any)) != 1 {
		t.Errorf("webhook add -events: %s, %v", text, err)
	}
	if _, _, err := adminctl(t, env, "webhook", "add", "acme", "http://hooks.example.com/"); err == nil ||
		!strings.Contains(err.Error(), "400 BAD_REQUEST") || !strings.Contains(err.Error(), "parameter url") {
		t.Errorf("webhook add of an http URL: %v", err)
	}
	if out, text, err = adminctl(t, env, "webhook", "list", "acme"); err != nil || len(out["items"].([]any)) != 2 ||
		strings.Contains(text, "whsec_") {
		t.Errorf("webhook list: %s, %v", text, err)
	}
	if out, text, err = adminctl(t, env, "webhook", "rotate", "acme", id); err != nil ||
		out["previousSecretExpiresAt"] != "2030-03-11T12:00:00Z" || !strings.HasPrefix(out["secret"].(string), "whsec_") {
		t.Errorf("webhook rotate: %s, %v", text, err)
	}
	if out, text, err = adminctl(t, env, "webhook", "deliveries", "acme", id, "-limit", "5"); err != nil || out["items"] == nil {
		t.Errorf("webhook deliveries: %s, %v", text, err)
	}
	if _, text, err = adminctl(t, env, "webhook", "delete", "acme", id); err != nil || text != "" {
		t.Errorf("webhook delete: %q, %v", text, err)
	}
	if _, _, err := adminctl(t, env, "webhook", "delete", "acme", id); err == nil || !strings.Contains(err.Error(), "404 NOT_FOUND") {
		t.Errorf("webhook delete again: %v", err)
	}
	if _, _, err := adminctl(t, env, "webhook", "rotate", "acme"); err == nil {
		t.Error("webhook rotate without an id ran")
	}
	var help bytes.Buffer
	if err := run(context.Background(), []string{"help", "webhook"}, env, &help, &help); err != nil ||
		strings.Count(help.String(), "adminctl webhook ") != 5 {
		t.Errorf("help webhook: %v\n%s", err, help.String())
	}
}
