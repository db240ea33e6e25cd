// Command corpusgen writes Lectern's deterministic synthetic corpus
// (docs/corpus-format.md) with the generator, origin/corpus/gen, and prints
// a JSON summary as its last line:
//
//	go run ./tools/corpusgen -out DIR [-seed N] [-date YYYY-MM-DD] [-small | -scale K]
//
// -scale K writes K times the deployed corpus (K × the subjects of every
// tier, classes and media; gen.Options.Scale): tools/bench's scale section.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/lectern-api/lectern/origin/corpus/gen"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "corpusgen:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("corpusgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "", "output directory (required)")
	seed := fs.Int64("seed", 1, "random seed")
	date := fs.String("date", gen.DefaultDate, "date part of contentVersion (YYYY-MM-DD)")
	small := fs.Bool("small", false, "write a tiny corpus with every feature (for tests)")
	scale := fs.Int("scale", 1, "write K times the full corpus (K × subjects per tier, classes and media)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("usage: corpusgen -out DIR [-seed N] [-date YYYY-MM-DD] [-small | -scale K]")
	}
	sum, err := gen.Write(*out, gen.Options{Seed: *seed, Date: *date, Small: *small, Scale: *scale})
	if err != nil {
		return err
	}
	b, err := json.Marshal(sum)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s\n", b)
	return err
}
