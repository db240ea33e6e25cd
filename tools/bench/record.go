package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A record is one bench run as written under var/bench/: when, on which
// commit and machine, and every row with the figures read from it, so
// that the next run can print its change against this one.
type record struct {
	Started time.Time   `json:"started"`
	Commit  string      `json:"commit"` // short hash, "+dirty" when the tree had changes; "" outside git
	Machine machine     `json:"machine"`
	Args    []string    `json:"args"`
	Rows    []recordRow `json:"rows"`
}

// machine is what a figure depends on besides the code.
type machine struct {
	OS         string  `json:"os"`
	Arch       string  `json:"arch"`
	CPUs       int     `json:"cpus"`
	GOMAXPROCS int     `json:"gomaxprocs"`
	CPU        string  `json:"cpu,omitempty"`     // the model, from /proc/cpuinfo
	Load1      float64 `json:"load1,omitempty"`   // the 1-minute load average when the run began
	LoadAvg    string  `json:"loadavg,omitempty"` // the 1, 5 and 15-minute load averages when the run began
	LoadEnd    string  `json:"loadEnd,omitempty"` // the same when it ended
	Go         string  `json:"go"`
	Host       string  `json:"host,omitempty"`
}

type recordRow struct {
	ID      string    `json:"id,omitempty"`
	Backend string    `json:"backend,omitempty"` // sqlite, postgres, or "-" (no storage); absent in records before #38
	What    string    `json:"what"`
	Result  string    `json:"result,omitempty"`
	Ratio   string    `json:"ratio,omitempty"`
	Goal    string    `json:"goal,omitempty"`
	Verdict string    `json:"verdict,omitempty"`
	Detail  string    `json:"detail,omitempty"`
	Figures []float64 `json:"figures,omitempty"` // the numbers in Result, in order
}

// benchDir is where the records go, under the repository root.
const benchDir = "var/bench"

// newRecord describes this run and this machine.
func newRecord(ctx context.Context, root string, args []string, started time.Time) *record {
	r := &record{Started: started.UTC(), Args: args, Commit: commit(ctx, root), Machine: machine{
		OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), Go: runtime.Version(),
	}}
	r.Machine.Host, _ = os.Hostname()
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				r.Machine.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	r.Machine.LoadAvg = loadAverage()
	if f := strings.Fields(r.Machine.LoadAvg); len(f) > 0 {
		r.Machine.Load1, _ = strconv.ParseFloat(f[0], 64)
	}
	return r
}

// loadAverage is the machine's 1, 5 and 15-minute load averages
// (/proc/loadavg), "unknown" where there is none.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

// commit is the short hash of HEAD in root, "+dirty" when the work tree
// has changes, or "" when git cannot tell.
func commit(ctx context.Context, root string) string {
	out, err := exec.CommandContext(ctx, "git", "-C", root, "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return ""
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.CommandContext(ctx, "git", "-C", root, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
		c += "+dirty"
	}
	return c
}

// add records rows.
func (r *record) add(rows []row) {
	for _, w := range rows {
		r.Rows = append(r.Rows, recordRow{ID: w.id, Backend: w.backend, What: strings.TrimSpace(w.what), Result: w.result, Ratio: w.ratio,
			Goal: w.goal, Verdict: w.verdict, Detail: w.detail, Figures: figures(w.result)})
	}
}

// number is a figure as the rows print it: digits with optional thousands
// commas and fraction, not part of a word (the 50 of "p50" is a name).
var number = regexp.MustCompile(`(?:^|[^A-Za-z0-9_.])(-?[0-9][0-9,]*(?:\.[0-9]+)?)`)

// figures reads the numbers in s, in order.
func figures(s string) []float64 {
	var out []float64
	for _, m := range number.FindAllStringSubmatch(s, -1) {
		if f, err := strconv.ParseFloat(strings.ReplaceAll(m[1], ",", ""), 64); err == nil {
			out = append(out, f)
		}
	}
	return out
}

// change is a row's change against the same row (same id, backend and
// measurement; a record from before backends counts as SQLite's) of prev: the first figure's relative change, and the
// previous result; "" when prev has no such row or no comparable figure.
func change(prev *record, r recordRow) string {
	if prev == nil || len(r.Figures) == 0 {
		return ""
	}
	i := slices.IndexFunc(prev.Rows, func(p recordRow) bool {
		return p.ID == r.ID && p.What == r.What && (p.Backend == r.Backend || p.Backend == "" && r.Backend != "postgres")
	})
	if i < 0 {
		return "new"
	}
	p := prev.Rows[i]
	if len(p.Figures) == 0 || p.Figures[0] == 0 {
		return ""
	}
	return fmt.Sprintf("%+.1f%% (was %s)", 100*(r.Figures[0]-p.Figures[0])/p.Figures[0], p.Result)
}

// latest reads the newest record in dir, or nil when there is none.
// Records are named by their start time, so the newest sorts last.
func latest(dir string) (*record, string) {
	names, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	slices.Sort(names)
	for i := len(names) - 1; i >= 0; i-- {
		b, err := os.ReadFile(names[i])
		if err != nil {
			continue
		}
		var r record
		if json.Unmarshal(b, &r) == nil {
			return &r, names[i]
		}
	}
	return nil, ""
}

// write saves r in dir as <start time>-<commit>.json and returns its path.
func (r *record) write(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	name := r.Started.Format("20060102T150405Z")
	if r.Commit != "" {
		name += "-" + r.Commit
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, name+".json")
	return path, os.WriteFile(path, append(b, '\n'), 0o644)
}

// or is s, or def when s is empty.
func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
