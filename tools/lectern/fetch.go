package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// errRestart is a resume the server could not satisfy: part was emptied,
// and the download starts again.
var errRestart = errors.New("the range is not satisfiable: starting again")

// errLinkGone is a download link the server no longer serves (expired,
// or its organisation may no longer read it): export or mint again.
var errLinkGone = errors.New("the download link is no longer served")

// errSize is a download longer than it was declared (by its
// Content-Length, its Content-Range or the manifest that lists it), or
// declared otherwise than its manifest: part is emptied.
var errSize = errors.New("the download is not of its declared size")

// fetch downloads url into part, resuming what part already holds when
// etag (the validator of those bytes) is known: a Range from its size
// with If-Range, so a server whose bytes changed sends them whole. It
// returns the validator of what part now holds, whole. onStart is told
// where the download starts and the validator of the bytes coming (to
// keep for a resume) before any is written; onBytes every chunk written.
// It never writes more than the Content-Length declares, nor than the
// client's -max-download bound (c is a plainClient).
func fetch(ctx context.Context, c *http.Client, url, part, etag string, onStart func(have, total int64, etag string) error, onBytes func(int)) (string, error) {
	return fetchSized(ctx, c, url, part, etag, -1, onStart, onBytes)
}

// fetchSized is fetch of a file whose size is known to be size bytes (-1:
// unknown): an answer declaring another size is refused before a byte is
// written, and one running past it is cut there (errSize).
func fetchSized(ctx context.Context, c *http.Client, url, part, etag string, size int64, onStart func(have, total int64, etag string) error, onBytes func(int)) (string, error) {
	for attempt := 0; ; attempt++ {
		tag, err := fetchOnce(ctx, c, url, part, etag, size, onStart, onBytes)
		if errors.Is(err, errRestart) && attempt == 0 {
			etag = ""
			continue
		}
		var e *apiError
		if errors.As(err, &e) && e.Code == "RATE_LIMITED" && e.RetryAfter <= maxWait && attempt < 20 {
			// The organisation's downloads at once, or their rate: wait.
			if err := sleepCtx(ctx, max(e.RetryAfter, time.Second)); err != nil {
				return "", err
			}
			continue
		}
		return tag, err
	}
}

// fetchOnce is one request of fetch.
func fetchOnce(ctx context.Context, c *http.Client, url, part, etag string, size int64, onStart func(have, total int64, etag string) error, onBytes func(int)) (tag string, err error) {
	f, err := os.OpenFile(part, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return "", err
	}
	defer f.Close()
	defer func() {
		if errors.Is(err, errSize) {
			f.Truncate(0) // what it holds is not the file: free the disk
		}
	}()
	have, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return "", err
	}
	if have > 0 && etag != "" {
		req.Header.Set("Range", "bytes="+strconv.FormatInt(have, 10)+"-")
		req.Header.Set("If-Range", etag)
	}
	resp, err := c.Do(req)
	if err != nil {
		var ue *neturl.Error
		if errors.As(err, &ue) {
			ue.URL = redact(ue.URL) // no signature in messages
		}
		return "", err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		if err := f.Truncate(0); err != nil {
			return "", err
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return "", err
		}
		have = 0
	case http.StatusPartialContent:
		cr := resp.Header.Get("Content-Range")
		if !strings.HasPrefix(cr, "bytes "+strconv.FormatInt(have, 10)+"-") {
			return "", fmt.Errorf("GET %s: a range from %d answered Content-Range %q", redact(url), have, cr)
		}
		if i := strings.LastIndexByte(cr, '/'); size >= 0 && cr[i+1:] != strconv.FormatInt(size, 10) {
			return "", fmt.Errorf("%w: GET %s: Content-Range %q, not of the %d bytes declared", errSize, redact(url), cr, size)
		}
	case http.StatusRequestedRangeNotSatisfiable:
		// What part holds is already the whole file.
		if cr := resp.Header.Get("Content-Range"); cr == "bytes */"+strconv.FormatInt(have, 10) {
			return etag, f.Sync()
		}
		// part holds more than the file, or other bytes: start again.
		if err := f.Truncate(0); err != nil {
			return "", err
		}
		return "", errRestart
	case http.StatusNotFound, http.StatusForbidden:
		e := readAPIError(resp)
		return "", fmt.Errorf("%w: %v", errLinkGone, e)
	default:
		return "", readAPIError(resp)
	}
	total := have + resp.ContentLength
	switch {
	case resp.ContentLength >= 0 && size >= 0 && total != size:
		return "", fmt.Errorf("%w: GET %s declares %d bytes, not the %d its manifest lists", errSize, redact(url), total, size)
	case resp.ContentLength < 0:
		total = size // -1: unknown, bounded by -max-download
	}
	newTag := resp.Header.Get("ETag")
	if onStart != nil {
		if err := onStart(have, total, newTag); err != nil {
			return "", err
		}
	}
	buf := make([]byte, 256<<10)
	written := have
	for {
		if total >= 0 && int64(len(buf)) > total-written+1 {
			buf = buf[:total-written+1]
		}
		n, rerr := resp.Body.Read(buf)
		if total >= 0 && written+int64(n) > total {
			return "", fmt.Errorf("%w: GET %s sends more than its %d bytes", errSize, redact(url), total)
		}
		written += int64(n)
		if n > 0 {
			if _, err := f.Write(buf[:n]); err != nil {
				return "", err
			}
			if onBytes != nil {
				onBytes(n)
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return newTag, rerr
		}
	}
	if err := f.Sync(); err != nil {
		return "", err
	}
	if total >= 0 {
		st, err := f.Stat()
		if err != nil {
			return "", err
		}
		if st.Size() != total {
			return newTag, fmt.Errorf("GET %s: %d bytes of %d", redact(url), st.Size(), total)
		}
	}
	return newTag, nil
}

// redact is a signed link without its query (the signature), for messages.
func redact(url string) string {
	if i := strings.IndexByte(url, '?'); i >= 0 {
		return url[:i]
	}
	return url
}
