package wazero

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/lectern-api/lectern/shared/edgesig"
	"github.com/lectern-api/lectern/shared/lease"
	"github.com/lectern-api/lectern/shared/reqid"
)

// The usage log (docs/edge.md, "Leases"). Each 304 the module answers on
// a lease carries the lease's cumulative count; the host appends it to the
// log before the 304 is written, so a use the client saw survives the
// process being killed, as the origin's meters do (a write(2) to a file
// opened O_APPEND, no fsync: the page cache outlives the process, as it
// does SQLite's synchronous=NORMAL commits). At the next start the log of
// the run before is replayed to the origin: each lease's highest count, as
// a final report (the module that held the lease is gone).
//
// Records are "<lease id> <used>\n". One record is one write(2), under a
// mutex, so records never interleave; a record cut short (no newline: the
// process died inside the write) is skipped, and is harmless to skip: it
// was written before its 304, which was then never sent, and the record
// before it holds every use that was.
//
// Replay never truncates a file that the current run appends to: at start
// the log's records are merged into <log>.replay (written whole, then
// renamed into place) and the log starts empty; the replay file is removed
// once the origin has answered 204 to all of it, and is merged again at the
// next start if it never was. Reports are cumulative and the origin applies
// the highest, so a record sent twice changes nothing.

// The log is compacted as it grows: once it is over compactAt, and twice
// what the last compaction left, it is rewritten (a temporary file renamed
// over it) with one record per lease still live, the highest count of
// each. A lease is settled, and left out, once the origin has
// acknowledged its final report: a 200 or 204 to a lease request or usage
// report that carried it (the host reads their bodies). A lease dropped by
// a revoke push stays live: should the push's answer not reach the origin,
// the next start reports it. So the log holds about one record per open
// lease plus what came since the last compaction.
const compactAt = 1 << 20

// usageLog is the current run's log.
type usageLog struct {
	mu        sync.Mutex
	f         *os.File
	path      string
	buf       []byte
	size      int64            // bytes in the file
	base      int64            // bytes after the last compaction: the next waits until it doubles
	live      map[string]int64 // lease → highest count logged, until settled
	compactAt int64
	log       *slog.Logger
}

// replayPath is where earlier runs' records wait for the origin.
func replayPath(log string) string { return log + ".replay" }

// openUsageLog opens the log at path (creating its directory, mode 0700,
// and the file, mode 0600) after moving the records of earlier runs into
// the replay file, and returns those records as final reports, by lease
// id.
func openUsageLog(path string, log *slog.Logger) (*usageLog, []lease.Report, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, nil, fmt.Errorf("usage log: %w", err)
	}
	used := map[string]int64{}
	for _, p := range []string{replayPath(path), path} {
		b, err := os.ReadFile(p)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, nil, fmt.Errorf("usage log: %w", err)
		}
		readUsage(b, used)
	}
	pending := finalReports(used)
	if len(pending) > 0 {
		if err := writeReplay(replayPath(path), pending); err != nil {
			return nil, nil, err
		}
	} else if err := os.Remove(replayPath(path)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("usage log: %w", err)
	}
	// Only now, the earlier records safe in the replay file, does the log
	// start empty. A crash before this line merges them once more.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("usage log: %w", err)
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("usage log: %w", err)
	}
	return &usageLog{f: f, path: path, live: map[string]int64{}, compactAt: compactAt, log: log}, pending, nil
}

// readUsage adds b's records to used, keeping each lease's highest count.
// A line that is not a whole record (the last one cut short, or damage)
// is skipped.
func readUsage(b []byte, used map[string]int64) {
	for len(b) > 0 {
		line, rest, ok := bytes.Cut(b, []byte{'\n'})
		if !ok {
			return // torn: the write that made it never finished
		}
		b = rest
		id, n, ok := bytes.Cut(line, []byte{' '})
		if !ok || !lease.ValidID(string(id)) {
			continue
		}
		v, err := strconv.ParseInt(string(n), 10, 64)
		if err != nil || v < 0 {
			continue
		}
		used[string(id)] = max(used[string(id)], v)
	}
}

// finalReports lists used as final reports, by lease id.
func finalReports(used map[string]int64) []lease.Report {
	rs := make([]lease.Report, 0, len(used))
	for id, n := range used {
		rs = append(rs, lease.Report{Lease: id, Used: n, Final: true})
	}
	slices.SortFunc(rs, func(a, b lease.Report) int {
		if a.Lease < b.Lease {
			return -1
		}
		if a.Lease > b.Lease {
			return 1
		}
		return 0
	})
	return rs
}

// writeReplay replaces the replay file with rs: written to a temporary
// file, then renamed over it, so a crash leaves the old file or the new.
func writeReplay(path string, rs []lease.Report) error {
	var b []byte
	for _, r := range rs {
		b = appendRecord(b, r.Lease, r.Used)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("usage log: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("usage log: %w", err)
	}
	return nil
}

func appendRecord(b []byte, id string, used int64) []byte {
	b = append(b, id...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, used, 10)
	return append(b, '\n')
}

// append logs that lease id has answered used 304s: one write(2).
func (l *usageLog) append(id string, used int64) error {
	if !lease.ValidID(id) || used < 0 {
		return fmt.Errorf("usage log: record %q %d is not a lease id and a count", id, used)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return errors.New("usage log: closed")
	}
	l.buf = appendRecord(l.buf[:0], id, used)
	n, err := l.f.Write(l.buf)
	l.size += int64(n)
	if err != nil {
		return fmt.Errorf("usage log: %w", err)
	}
	l.live[id] = max(l.live[id], used)
	if l.size >= max(l.compactAt, 2*l.base) {
		// The record is written: a failed compaction is logged, and
		// tried again at the next record.
		if err := l.compact(); err != nil {
			l.log.Error("edge: usage log", "err", err)
		}
	}
	return nil
}

// settled forgets the leases whose final report, rs, the origin has
// acknowledged (up to what was logged): the next compaction leaves them
// out.
func (l *usageLog) settled(rs []lease.Report) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range rs {
		if n, ok := l.live[r.Lease]; ok && r.Final && r.Used >= n {
			delete(l.live, r.Lease)
		}
	}
}

// compact rewrites the log with one record per live lease. The file is
// written whole and renamed over the log, so a crash leaves the old log
// or the new; every record the old one held is either in the new one or
// settled. l.mu is held.
func (l *usageLog) compact() error {
	tmp := l.path + ".tmp"
	var b []byte
	for _, r := range finalReports(l.live) {
		b = appendRecord(b, r.Lease, r.Used)
	}
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("usage log: compact: %w", err)
	}
	if err := os.Rename(tmp, l.path); err != nil {
		return fmt.Errorf("usage log: compact: %w", err)
	}
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		// The old file is gone from the directory: appending to it would
		// lose records, so the log refuses them (their 304s fail).
		l.f.Close()
		l.f = nil
		return fmt.Errorf("usage log: reopen after compacting: %w", err)
	}
	l.f.Close()
	l.f, l.size, l.base = f, int64(len(b)), int64(len(b))
	return nil
}

func (l *usageLog) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// usageRetry is the first wait before the replay is sent again after a
// failure; it doubles to maxUsageRetry.
const (
	usageRetry    = time.Second
	maxUsageRetry = 30 * time.Second
)

// replay sends the earlier runs' reports (openUsageLog) to the origin
// until it has answered 204 to every message, then removes the replay
// file. It waits between attempts, longer each time, and gives up when
// ctx is done (Close), the file kept for the next start.
func (h *Host) replay(ctx context.Context, path string, rs []lease.Report, retry time.Duration) {
	for {
		err := h.sendReports(ctx, rs)
		if err == nil {
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				h.cfg.Logger.Error("edge: usage log: remove the replayed file", "err", err)
			}
			h.mu.Lock()
			h.replaying = nil
			h.mu.Unlock()
			h.cfg.Logger.Info("edge: usage log replayed", "leases", len(rs))
			return
		}
		h.cfg.Logger.Warn("edge: usage log replay failed; retrying", "err", err, "in", retry)
		select {
		case <-ctx.Done():
			return
		case <-time.After(retry):
		}
		retry = min(2*retry, maxUsageRetry)
	}
}

// sendReports posts rs to the origin's usage endpoint, in messages of at
// most lease.MaxReports, each signed by the host (edgesig purpose Usage).
// It fails unless every message is answered 204.
func (h *Host) sendReports(ctx context.Context, rs []lease.Report) error {
	for len(rs) > 0 {
		n := min(len(rs), lease.MaxReports)
		if err := h.postUsage(ctx, rs[:n]); err != nil {
			return err
		}
		rs = rs[n:]
	}
	return nil
}

func (h *Host) postUsage(ctx context.Context, rs []lease.Report) error {
	id := reqid.New()
	body := lease.AppendReports(nil, rs)
	var seed [8]byte
	rand.Read(seed[:])
	signer := edgesig.NewSigner(h.keys, binary.LittleEndian.Uint64(seed[:]))
	signer.V2 = h.cfg.SignV2
	// The host's own POST: sent to another origin only when never sent.
	out := &Output{Method: "POST", URL: h.cfg.Origin + lease.UsagePath, Body: string(body), Retry: retryUnsent,
		Headers: [][2]string{{"Content-Type", "application/json"}, {"X-Request-Id", id}},
		sign: func(host string) string {
			return signer.Sign(&edgesig.Message{Purpose: edgesig.Usage, Method: "POST", Host: host, Target: lease.UsagePath,
				Body: edgesig.BodyHash(body), RequestID: id}, h.now())
		}}
	msg, _ := h.subrequest(ctx, nil, out)
	h.observer.UsageReport(usageResult(msg.Status))
	switch {
	case msg.Status == 0:
		return fmt.Errorf("POST %s: %s", out.URL, msg.Error)
	case msg.Status != 204:
		body := ""
		if msg.Body != nil {
			body = *msg.Body
		}
		return fmt.Errorf("POST %s: status %d: %.200s", out.URL, msg.Status, body)
	}
	return nil
}
