package main

import (
	"testing"
)

func TestParseBackends(t *testing.T) {
	const pg = "postgres://u@h:5432/db?sslmode=disable"
	for _, tc := range []struct {
		in    string
		names []string
		bad   bool
	}{
		{in: "sqlite", names: []string{"sqlite"}},
		{in: pg, names: []string{"postgres"}},
		{in: "sqlite," + pg, names: []string{"sqlite", "postgres"}},
		{in: "postgresql://u@h/db", names: []string{"postgres"}},
		{in: "mysql://u@h/db", bad: true},
		{in: "sqlite,sqlite", bad: true},
		{in: "", bad: true},
	} {
		bs, err := parseBackends(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("%q: want an error, got %v", tc.in, bs)
			}
			continue
		}
		if err != nil || len(bs) != len(tc.names) {
			t.Errorf("%q: %v, %v", tc.in, bs, err)
			continue
		}
		for i, b := range bs {
			if b.name != tc.names[i] || (b.name == "postgres") != (b.url != "") {
				t.Errorf("%q: backend %d is %+v, want %s", tc.in, i, b, tc.names[i])
			}
		}
	}
}

// TestChangeComparesTheSameBackend: a row's change is against the same
// row of the same backend; a record from before backends counts as
// SQLite's.
func TestChangeComparesTheSameBackend(t *testing.T) {
	prev := &record{Rows: []recordRow{
		{ID: "b", Backend: "postgres", What: "lesson", Result: "100 req/s", Figures: []float64{100}},
		{ID: "c", What: "subjects", Result: "50 req/s", Figures: []float64{50}},
	}}
	if got := change(prev, recordRow{ID: "b", Backend: "sqlite", What: "lesson", Figures: []float64{200}}); got != "new" {
		t.Errorf("sqlite row against a postgres one: %q, want new", got)
	}
	if got := change(prev, recordRow{ID: "b", Backend: "postgres", What: "lesson", Figures: []float64{110}}); got != "+10.0% (was 100 req/s)" {
		t.Errorf("postgres row: %q", got)
	}
	if got := change(prev, recordRow{ID: "c", Backend: "sqlite", What: "subjects", Figures: []float64{25}}); got != "-50.0% (was 50 req/s)" {
		t.Errorf("sqlite row against an unlabelled one: %q", got)
	}
	if got := change(prev, recordRow{ID: "c", Backend: "postgres", What: "subjects", Figures: []float64{25}}); got != "new" {
		t.Errorf("postgres row against an unlabelled one: %q, want new", got)
	}
}
