package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/meter"
)

// runLine runs one command line and returns stdout, stderr and the error.
func runLine(getenv func(string) string, line ...string) (string, string, error) {
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), line, getenv, &stdout, &stderr)
	return stdout.String(), stderr.String(), err
}

// archiveIDs reads an archive's NDJSON: each line's id and orgId.
func archiveIDs(t *testing.T, ndjson string) ([]int64, []string) {
	t.Helper()
	ids, orgs := []int64{}, []string{}
	sc := bufio.NewScanner(strings.NewReader(ndjson))
	for sc.Scan() {
		var row map[string]any
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatalf("archive line %q: %v", sc.Text(), err)
		}
		ids = append(ids, int64(row["id"].(float64)))
		orgs = append(orgs, row["orgId"].(string))
	}
	return ids, orgs
}

// files lists dir's entries.
func files(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// ledger archive writes the rows created before its time, of every
// organisation, to a new 0600 file (never over one) or stdout; ledger
// trim needs -yes, then deletes them and prints how many.
func TestLedgerArchiveTrim(t *testing.T) {
	env, st, m := serveStores(t)
	for _, id := range []string{"acme", "other"} {
		if _, _, err := adminctl(t, env, "org", "create", "-id", id); err != nil {
			t.Fatal(err)
		}
	}
	wall := time.Date(2030, 3, 10, 12, 0, 0, 0, time.UTC) // serveStores's clock
	write := func(org string, now time.Time, n int) []int64 {
		o, err := st.GetOrg(context.Background(), org)
		if err != nil {
			t.Fatal(err)
		}
		var entries []meter.Entry
		for range n {
			entries = append(entries, meter.Entry{Kind: meter.KindMedia, Target: "img-1", Format: "url", Client: "c1",
				ContentVersion: "v1", RequestID: "r1", Expires: now.Add(15 * time.Minute), KeyID: "k1"})
		}
		res, err := m.Apply(context.Background(), meter.Op{Org: meter.Key(o), Now: now,
			Stages: []meter.Stage{{{Meter: meter.MonthCalls, N: 1}}}, Ledger: entries})
		if err != nil {
			t.Fatal(err)
		}
		return res.LedgerIDs
	}
	old := write("acme", wall.Add(-40*24*time.Hour), 2)
	old = append(old, write("other", wall.Add(-35*24*time.Hour), 1)...)
	kept := write("acme", wall.Add(-2*24*time.Hour), 1)
	kept = append(kept, write("other", wall.Add(-time.Hour), 1)...)
	const before = "2030-02-10T00:00:00Z"

	dir := t.TempDir()
	file := filepath.Join(dir, "ledger-2030-02.ndjson")
	stdout, stderr, err := runLine(env, "ledger", "archive", "-before", before, "-o", file)
	if err != nil || stdout != "" || !strings.Contains(stderr, "3 ledger rows created before "+before+" archived to "+file) {
		t.Fatalf("ledger archive -o: %v, stdout %q, stderr %q", err, stdout, stderr)
	}
	fi, err := os.Stat(file)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the archive: %v, %v; want mode 0600", fi, err)
	}
	archived, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if ids, orgs := archiveIDs(t, string(archived)); !slices.Equal(ids, old) || !slices.Equal(orgs, []string{"acme", "acme", "other"}) {
		t.Errorf("archived ids %v of %v, want %v of acme, acme, other", ids, orgs, old)
	}
	if got := files(t, dir); !slices.Equal(got, []string{filepath.Base(file)}) {
		t.Errorf("the directory holds %v, want the archive only", got)
	}
	// The same to stdout; an existing file is never overwritten.
	stdout, _, err = runLine(env, "ledger", "archive", "-before", before)
	if err != nil || stdout != string(archived) {
		t.Errorf("ledger archive to stdout: %v\n%s\nwant\n%s", err, stdout, archived)
	}
	if _, _, err := runLine(env, "ledger", "archive", "-o", file, "-before", "2030-03-01T00:00:00Z"); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("ledger archive over an existing file: %v", err)
	}
	if b, _ := os.ReadFile(file); !bytes.Equal(b, archived) {
		t.Error("the existing archive changed")
	}

	// A trim without -yes says what it would do and fails, asking nothing.
	noToken := func(k string) string {
		if k == "LECTERN_ADMIN_TOKEN" {
			return ""
		}
		return env(k)
	}
	_, _, err = runLine(noToken, "ledger", "trim", "-before", before)
	if err == nil || errors.Is(err, errUsage) || !strings.Contains(err.Error(), "-yes") || !strings.Contains(err.Error(), "created before "+before) ||
		!strings.Contains(err.Error(), "ledger archive -before "+before) {
		t.Errorf("ledger trim without -yes: %v", err)
	}
	if ids, _ := archiveIDs(t, mustArchive(t, env, before)); !slices.Equal(ids, old) {
		t.Fatalf("a trim without -yes deleted rows: %v left", ids)
	}
	out, text, err := adminctl(t, env, "ledger", "trim", "-before", before, "-yes")
	if err != nil || out["deleted"] != float64(len(old)) {
		t.Fatalf("ledger trim -yes: %v\n%s", err, text)
	}
	if a := mustArchive(t, env, "2030-03-09T12:00:00Z"); !strings.Contains(a, `"id":`+itoa(kept[0])) || strings.Contains(a, `"id":`+itoa(old[0])+",") {
		t.Errorf("after the trim, the archive at the floor holds:\n%s", a)
	}
	if out, _, err := adminctl(t, env, "ledger", "trim", "-yes", "-before", before); err != nil || out["deleted"] != 0.0 {
		t.Errorf("ledger trim again: %v, %v", out, err)
	}

	// The API refuses a time inside the 24 hours, or not RFC 3339: no
	// file is left, nothing is deleted.
	for _, bad := range []string{"2030-03-10T00:00:00Z", "2030-02-10", "last month"} {
		f := filepath.Join(dir, "bad.ndjson")
		if _, _, err := runLine(env, "ledger", "archive", "-before", bad, "-o", f); err == nil ||
			!strings.Contains(err.Error(), "400 BAD_REQUEST") || !strings.Contains(err.Error(), "parameter before") {
			t.Errorf("ledger archive -before %q: %v", bad, err)
		}
		if _, _, err := runLine(env, "ledger", "trim", "-before", bad, "-yes"); err == nil ||
			!strings.Contains(err.Error(), "400 BAD_REQUEST") || !strings.Contains(err.Error(), "parameter before") {
			t.Errorf("ledger trim -before %q: %v", bad, err)
		}
	}
	if got := files(t, dir); !slices.Equal(got, []string{filepath.Base(file)}) {
		t.Errorf("after refusals the directory holds %v", got)
	}
	if _, _, err := runLine(env, "-token", "wrong", "ledger", "archive", "-before", before); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("ledger archive with a wrong token: %v", err)
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

// mustArchive is ledger archive to stdout.
func mustArchive(t *testing.T, env func(string) string, before string) string {
	t.Helper()
	stdout, _, err := runLine(env, "ledger", "archive", "-before", before)
	if err != nil {
		t.Fatalf("ledger archive -before %s: %v", before, err)
	}
	return stdout
}

// An archive cut short by the origin fails the command and leaves no
// file, nor any temporary one.
func TestLedgerArchiveCutShort(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.WriteHeader(200)
		w.Write([]byte("{\"id\":1,\"orgId\":\"acme\"}\n{\"id\":2,"))
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}))
	t.Cleanup(srv.Close)
	env := func(k string) string {
		return map[string]string{"LECTERN_ADMIN_ADDR": srv.URL, "LECTERN_ADMIN_TOKEN": token}[k]
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "archive.ndjson")
	_, stderr, err := runLine(env, "ledger", "archive", "-before", "2030-01-01T00:00:00Z", "-o", file)
	if err == nil || !strings.Contains(err.Error(), "cut short after 1 rows") {
		t.Errorf("an archive cut short: %v (stderr %q)", err, stderr)
	}
	if got := files(t, dir); len(got) != 0 {
		t.Errorf("an archive cut short left %v", got)
	}
	if _, _, err := runLine(env, "ledger", "archive", "-before", "2030-01-01T00:00:00Z"); err == nil || !strings.Contains(err.Error(), "cut short") {
		t.Errorf("an archive cut short, to stdout: %v", err)
	}
}

// The retention commands' command lines; their help.
func TestLedgerRetentionUsage(t *testing.T) {
	env := serve(t)
	for _, line := range [][]string{
		{"ledger", "archive"},
		{"ledger", "trim"},
		{"ledger", "trim", "-yes"},
		{"ledger", "archive", "-before", "2030-01-01T00:00:00Z", "extra"},
		{"ledger", "archive", "-before", "2030-01-01T00:00:00Z", "-yes"},
		{"ledger", "trim", "-before", "2030-01-01T00:00:00Z", "-o", "f"},
		{"ledger", "archive", "-after", "3", "-before", "2030-01-01T00:00:00Z"},
	} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), line, env, &stdout, &stderr)
		if !errors.Is(err, errUsage) || !strings.Contains(stderr.String(), "usage: adminctl") {
			t.Errorf("%q: err = %v, want a usage error with the usage", line, err)
		}
	}
	// An organisation named archive is listed with a flag first.
	if _, _, err := adminctl(t, env, "org", "create", "-id", "archive"); err != nil {
		t.Fatal(err)
	}
	if out, text, err := adminctl(t, env, "ledger", "-limit", "5", "archive"); err != nil || out["items"] == nil {
		t.Errorf("ledger -limit 5 archive: %v\n%s", err, text)
	}
	for _, tc := range []struct {
		line []string
		want string
	}{
		{[]string{"ledger", "archive", "-h"}, "adminctl ledger archive -before RFC3339 [-o FILE]"},
		{[]string{"help", "ledger", "trim"}, "adminctl ledger trim -before RFC3339 [-yes]"},
	} {
		stdout, _, err := runLine(env, tc.line...)
		if err != nil || !strings.Contains(stdout, tc.want) || strings.Contains(stdout, "adminctl ledger ORG") {
			t.Errorf("%v: %v\n%s", tc.line, err, stdout)
		}
	}
	stdout, _, _ := runLine(env, "help", "ledger")
	for _, want := range []string{"ledger ORG", "ledger archive", "ledger trim", "24 hours"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("help ledger lacks %q:\n%s", want, stdout)
		}
	}
}
