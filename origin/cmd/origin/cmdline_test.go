package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lectern-api/lectern/internal/cmdline"
	"github.com/lectern-api/lectern/internal/version"
)

// TestHelpAndVersion: `origin -h` and `origin -version` (the release)
// answer on stdout and start nothing (run returns at once with cmdline.ErrDone, which main
// turns into exit status 0).
func TestHelpAndVersion(t *testing.T) {
	for arg, want := range map[string]string{"-h": "$LECTERN_DB", "-version": "origin " + version.Release + " ("} {
		var out bytes.Buffer
		err := run(context.Background(), []string{arg}, func(string) string { return "" }, &out)
		if !errors.Is(err, cmdline.ErrDone) || !strings.Contains(out.String(), want) {
			t.Errorf("%s: %v\n%s", arg, err, out.String())
		}
	}
	if _, err := parseConfig(nil, func(k string) string { return map[string]string{"LECTERN_TEST_CLOCK": "on"}[k] }); err == nil {
		t.Error("LECTERN_TEST_CLOCK=on: accepted")
	}
}

// LECTERN_LEASES is on or off (default on), LECTERN_LEASE_TTL a Go
// duration from 100ms to 60s (default 5s); any other value stops the
// start with a message naming the variable.
func TestLeaseSettings(t *testing.T) {
	parse := func(env map[string]string) (config, error) {
		return parseConfig(nil, func(k string) string { return env[k] })
	}
	c, err := parse(nil)
	if err != nil || !c.Leases || c.leaseTTL != 5*time.Second {
		t.Errorf("defaults: leases %v, ttl %v, %v", c.Leases, c.leaseTTL, err)
	}
	c, err = parse(map[string]string{"LECTERN_LEASES": "off", "LECTERN_LEASE_TTL": "100ms"})
	if err != nil || c.Leases || c.leaseTTL != 100*time.Millisecond {
		t.Errorf("off, 100ms: leases %v, ttl %v, %v", c.Leases, c.leaseTTL, err)
	}
	if c, err = parse(map[string]string{"LECTERN_LEASE_TTL": "60s"}); err != nil || c.leaseTTL != time.Minute {
		t.Errorf("60s: %v %v", c.leaseTTL, err)
	}
	for env, bad := range map[string]string{
		"LECTERN_LEASES": "yes", "LECTERN_LEASE_TTL": "99ms",
	} {
		if _, err := parse(map[string]string{env: bad}); err == nil || !strings.Contains(err.Error(), env) {
			t.Errorf("%s=%s: %v", env, bad, err)
		}
	}
	for _, bad := range []string{"61s", "5", "-1s", "soon"} {
		if _, err := parse(map[string]string{"LECTERN_LEASE_TTL": bad}); err == nil || !strings.Contains(err.Error(), "LECTERN_LEASE_TTL") {
			t.Errorf("LECTERN_LEASE_TTL=%s: %v", bad, err)
		}
	}
}

// GOMEMLIMIT set (any value, off too) leaves the memory limit to the Go
// runtime; unset, the origin sets its own (wiring.Options.MemoryLimit;
// origin/wiring's TestMemoryLimitSet and TestMemoryLimitOperators).
func TestGOMEMLIMIT(t *testing.T) {
	for v, auto := range map[string]bool{"": true, "3GiB": false, "off": false} {
		c, err := parseConfig(nil, func(k string) string { return map[string]string{"GOMEMLIMIT": v}[k] })
		if err != nil || c.autoMemLimit != auto {
			t.Errorf("GOMEMLIMIT=%q: the origin sets the limit %v, %v; want %v", v, c.autoMemLimit, err, auto)
		}
	}
}

// LECTERN_CLIENT_SECRET_HASH is keyed (the default) or bcrypt, the
// rolling upgrade's (idp.Config.BcryptSecrets); any other value stops
// the start with a message naming the variable.
func TestClientSecretHashSetting(t *testing.T) {
	for v, bcrypt := range map[string]bool{"": false, "keyed": false, "bcrypt": true} {
		c, err := parseConfig(nil, func(k string) string { return map[string]string{"LECTERN_CLIENT_SECRET_HASH": v}[k] })
		if err != nil || c.bcryptSecrets != bcrypt {
			t.Errorf("LECTERN_CLIENT_SECRET_HASH=%q: bcrypt %v, %v; want %v", v, c.bcryptSecrets, err, bcrypt)
		}
	}
	for _, bad := range []string{"BCRYPT", "sha256", "1"} {
		_, err := parseConfig(nil, func(k string) string { return map[string]string{"LECTERN_CLIENT_SECRET_HASH": bad}[k] })
		if err == nil || !strings.Contains(err.Error(), "LECTERN_CLIENT_SECRET_HASH") {
			t.Errorf("LECTERN_CLIENT_SECRET_HASH=%s: %v", bad, err)
		}
	}
}
