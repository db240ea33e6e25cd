package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
)

// retention is a ledger archive or ledger trim command (docs/operations.md,
// "The export ledger's retention"): they do more than one call's
// pretty-printed answer.
type retention struct {
	trim   bool
	before string // as given: the API validates it (400 naming before)
	out    string // archive: the file, "" for stdout
	yes    bool   // trim: confirmed
}

// parseRetention reads "ledger archive …" and "ledger trim …", and
// reports whether cmd is one of them. An organisation named archive or
// trim is listed with a flag first: ledger -limit 100 archive.
func parseRetention(cmd []string) (retention, bool, error) {
	if len(cmd) < 2 || cmd[0] != "ledger" || (cmd[1] != "archive" && cmd[1] != "trim") {
		return retention{}, false, nil
	}
	name := "ledger " + cmd[1]
	r := retention{trim: cmd[1] == "trim"}
	flags := newFlags(name)
	flags.StringVar(&r.before, "before", "", "RFC 3339 time: the rows created before it (at least 24 hours ago)")
	if r.trim {
		flags.BoolVar(&r.yes, "yes", false, "delete the rows (without it, only say what would be deleted)")
	} else {
		flags.StringVar(&r.out, "o", "", "write the archive to this file (created 0600, never overwritten) instead of stdout")
	}
	if _, err := parseFlags(flags, cmd[2:], 0); err != nil {
		return r, true, err
	}
	if r.before == "" {
		return r, true, fmt.Errorf("%s needs -before", name)
	}
	return r, true, nil
}

// refused is why the command is not sent: a trim without -yes.
func (r retention) refused() error {
	if !r.trim || r.yes {
		return nil
	}
	return fmt.Errorf("ledger trim would delete every export ledger row, of every organisation, created before %s; "+
		"trimmed rows no longer name who got a leaked link. Archive them first "+
		"(adminctl ledger archive -before %s -o FILE), then run again with -yes", r.before, r.before)
}

// run sends the command: a trim prints the API's {"deleted": N}; an
// archive writes the NDJSON and tells stderr how many rows it wrote.
func (r retention) run(ctx context.Context, base, token string, stdout, stderr io.Writer) error {
	if r.trim {
		c, err := jsonCall("POST", "/admin/v1/ledger/trim", map[string]string{"before": r.before})
		if err != nil {
			return err
		}
		return do(ctx, base, token, c, stdout)
	}
	if r.out != "" {
		// Refused before anything is asked: an archive is the only copy
		// of rows about to be trimmed.
		if _, err := os.Lstat(r.out); err == nil {
			return fmt.Errorf("ledger archive: %s exists: an archive is never overwritten", r.out)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("ledger archive: %w", err)
		}
	}
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/admin/v1/ledger/archive?"+url.Values{"before": {r.before}}.Encode(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/x-ndjson")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return apiError(resp, raw)
	}
	var n int64
	if r.out == "" {
		n, err = copyRows(stdout, resp.Body)
		if err != nil {
			return fmt.Errorf("ledger archive: %w", err)
		}
	} else if n, err = writeArchive(r.out, resp.Body); err != nil {
		return fmt.Errorf("ledger archive: %w", err)
	}
	where := "stdout"
	if r.out != "" {
		where = r.out
	}
	fmt.Fprintf(stderr, "adminctl: %d ledger rows created before %s archived to %s\n", n, r.before, where)
	return nil
}

// copyRows copies the archive from body to w and returns its rows (its
// lines). An answer cut short (the origin failed after it began) is an
// error, as is one whose last line is not whole.
func copyRows(w io.Writer, body io.Reader) (int64, error) {
	lw := &lineCounter{w: w}
	if _, err := io.Copy(lw, body); err != nil {
		return lw.lines, fmt.Errorf("the answer was cut short after %d rows: %w", lw.lines, err)
	}
	if lw.last != 0 && lw.last != '\n' {
		return lw.lines, fmt.Errorf("the answer ends inside a row, after %d rows", lw.lines)
	}
	return lw.lines, nil
}

// writeArchive writes the archive from body to file, complete or not at
// all: to a temporary file (0600) beside it, synced, then linked to its
// name, which must not exist (renamed where links are not supported).
// On any failure the temporary file is removed and file is not created.
func writeArchive(file string, body io.Reader) (int64, error) {
	tmp, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".*.tmp")
	if err != nil {
		return 0, err
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	n, err := copyRows(tmp, body)
	if err != nil {
		return n, err
	}
	if err := tmp.Sync(); err != nil {
		return n, err
	}
	if err := tmp.Close(); err != nil {
		return n, err
	}
	switch err := os.Link(tmp.Name(), file); {
	case errors.Is(err, fs.ErrExist):
		return n, fmt.Errorf("%s exists: an archive is never overwritten", file)
	case err != nil:
		if err := os.Rename(tmp.Name(), file); err != nil {
			return n, err
		}
	}
	done = true
	os.Remove(tmp.Name()) // after a link; gone after a rename
	if d, err := os.Open(filepath.Dir(file)); err == nil {
		d.Sync() // the new name, durably: best effort
		d.Close()
	}
	return n, nil
}

// lineCounter counts the lines written through it, and keeps the last
// byte.
type lineCounter struct {
	w     io.Writer
	lines int64
	last  byte
}

func (c *lineCounter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.lines += int64(bytes.Count(p[:n], []byte{'\n'}))
	if n > 0 {
		c.last = p[n-1]
	}
	return n, err
}
