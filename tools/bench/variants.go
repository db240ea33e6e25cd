package main

// -variants: the edge module built with other build tags against the
// deployed build, as the module's hand-rolled pieces were measured
// against their standard library and fastjson alternatives, each behind
// a tag (docs/bench.md, "Hand-rolled pieces"; the tags were those of
// commit 421efd2: stdhmac, stdscan, stdjsonenc).
//
// The deployed TinyGo build and one TinyGo build per variant are measured
// in the same run: (f) interleaved as usual, every build's edge once per
// round; (g) once per build per round, -runs rounds, each flow for at
// most a second. Each row then says the median over the rounds, their
// spread, and the median of each round's difference from the deployed
// build measured in that round.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/worker/wasmbuild"
)

// variantBuilds builds the edge module with TinyGo, first as deployed
// and then once per variant of spec: variants separated by commas, the
// tags of one by '+' ("stdhmac,stdscan+stdjsonenc").
func variantBuilds(ctx context.Context, root, dir, spec string) ([]build, error) {
	tg := wasmbuild.TinyGo()
	if tg == "" {
		return nil, fmt.Errorf("-variants needs TinyGo (tools/tinygo/build.sh installs %s)", wasmbuild.TinyGoVersion)
	}
	tags := []string{""}
	for _, v := range strings.Split(spec, ",") {
		if v = strings.TrimSpace(v); v != "" {
			tags = append(tags, strings.ReplaceAll(v, "+", ","))
		}
	}
	var builds []build
	for i, t := range tags {
		out := filepath.Join(dir, fmt.Sprintf("worker-variant-%d.wasm", i))
		args, name := wasmbuild.TinyGoBuild(out, "./worker/wasm"), "TinyGo"
		if t != "" {
			args, name = slices.Insert(args, 1, "-tags", t), "TinyGo -tags "+t
		}
		if err := runCmd(ctx, root, nil, tg, args...); err != nil {
			return nil, err
		}
		b, err := os.ReadFile(out)
		if err != nil {
			return nil, err
		}
		builds = append(builds, build{name, b})
	}
	return builds, nil
}

// variantSizes are the builds' sizes.
func variantSizes(builds []build) []row {
	var rows []row
	for _, b := range builds {
		rows = append(rows, row{id: "h", what: "module, " + b.name, result: fmt.Sprintf("%d bytes", len(b.wasm)),
			detail: fmt.Sprintf("%+d bytes against %s", len(b.wasm)-len(builds[0].wasm), builds[0].name)})
	}
	return rows
}

// variantRatios summarises throughput's (f) rows: each round's ratio to
// that round's (a).
func variantRatios(rows []row, builds []build) []row {
	rounds := func(r row) []float64 {
		s, _, _ := strings.Cut(strings.TrimPrefix(r.detail, "runs "), ";")
		var v []float64
		for _, f := range strings.Fields(s) {
			x, _ := strconv.ParseFloat(f, 64)
			v = append(v, x)
		}
		return v
	}
	var base []float64
	var per [][]float64 // per build, per round
	for _, r := range rows {
		switch {
		case r.id == "a":
			base = rounds(r)
		case r.id == "f":
			v := rounds(r)
			for i := range v {
				v[i] /= base[i]
			}
			per = append(per, v)
		}
	}
	var out []row
	for i, v := range per {
		out = append(out, summary("f", "edge 304 through the wazero host + gate, "+builds[i].name, v, per[0], "%.3f", "×"))
	}
	return out
}

// workerRounds measures (g) -runs times, every build once a round, and
// summarises each row over the rounds.
func workerRounds(ctx context.Context, o options, st *stack, tokens []string, lesson *corpus.Lesson, builds []build,
	progress func(string, ...any)) ([]row, error) {
	var names []string
	byName := map[string][]float64{}
	o.time = min(o.time, time.Second) // each flow's length: the rounds are many
	for i := range o.runs {
		// Tokens as fresh as the round: the rounds outlast the first ones.
		tokens, err := st.tokens(ctx, 1)
		if err != nil {
			return nil, err
		}
		for _, b := range builds {
			progress("(g) round %d/%d", i+1, o.runs)
			rows, err := workerCPU(ctx, o, st, tokens, lesson, []build{b}, progress)
			if err != nil {
				return nil, err
			}
			for _, r := range rows {
				us, err := strconv.ParseFloat(strings.TrimSuffix(r.result, " µs/req"), 64)
				if err != nil {
					return nil, fmt.Errorf("(g) result %q: %w", r.result, err)
				}
				if _, seen := byName[r.what]; !seen {
					names = append(names, r.what)
				}
				byName[r.what] = append(byName[r.what], us)
			}
		}
	}
	var out []row
	for _, n := range names {
		deployed := byName[strings.Replace(n, ", "+buildOf(n, builds)+",", ", "+builds[0].name+",", 1)]
		out = append(out, summary("g", n, byName[n], deployed, "%.1f", " µs"))
	}
	return out, nil
}

// buildOf is the name of the build row what is about ("worker CPU, <build>, <flow>").
func buildOf(what string, builds []build) string {
	name := ""
	for _, b := range builds {
		if strings.Contains(what, ", "+b.name+",") && len(b.name) > len(name) {
			name = b.name
		}
	}
	return name
}

// summary is a row of v, one value a round: its median and spread, and
// the median of each round's difference from deployed's value of that
// round.
func summary(id, what string, v, deployed []float64, format, unit string) row {
	f := func(x float64) string { return fmt.Sprintf(format, x) }
	var all, diffs []string
	var d []float64
	for i, x := range v {
		all = append(all, f(x))
		if i < len(deployed) {
			d = append(d, x-deployed[i])
		}
	}
	for _, x := range d {
		diffs = append(diffs, fmt.Sprintf("%+"+format[1:], x))
	}
	s := slices.Sorted(slices.Values(v))
	return row{id: id, what: what + " (rounds)", result: f(median(v)) + unit,
		detail: fmt.Sprintf("rounds %s; spread %s–%s (%s); minus the deployed build's, round by round: %s, median %s",
			strings.Join(all, " "), f(s[0]), f(s[len(s)-1]), f(s[len(s)-1]-s[0]), strings.Join(diffs, " "), fmt.Sprintf("%+"+format[1:], median(d)))}
}

func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
