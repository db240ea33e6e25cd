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
	resp, err := getFrom(ctx, c, url, have, etag)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	have, whole, err := startOf(f, resp, url, have, size)
	switch {
	case err != nil:
		return "", err
	case whole:
		return etag, f.Sync()
	}
	total, err := declaredTotal(resp, url, have, size)
	if err != nil {
		return "", err
	}
	newTag := resp.Header.Get("ETag")
	if onStart != nil {
		if err := onStart(have, total, newTag); err != nil {
			return "", err
		}
	}
	return receive(f, resp.Body, url, newTag, have, total, onBytes)
}

// getFrom asks for url; from byte have when etag is the validator of the
// bytes before it (a Range with If-Range, so a server whose bytes changed
// sends them whole). Its error names the link without its signature.
func getFrom(ctx context.Context, c *http.Client, url string, have int64, etag string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return nil, err
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
		return nil, err
	}
	return resp, nil
}

// startOf reads resp's status: where in part (f, holding have bytes) its
// body starts, f emptied when it sends the file whole; whole when part
// already holds the whole file; errRestart when part holds more than the
// file, or other bytes (f emptied); an error for any other answer.
func startOf(f *os.File, resp *http.Response, url string, have, size int64) (from int64, whole bool, err error) {
	switch resp.StatusCode {
	case http.StatusOK:
		if err := f.Truncate(0); err != nil {
			return 0, false, err
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return 0, false, err
		}
		return 0, false, nil
	case http.StatusPartialContent:
		cr := resp.Header.Get("Content-Range")
		if !strings.HasPrefix(cr, "bytes "+strconv.FormatInt(have, 10)+"-") {
			return 0, false, fmt.Errorf("GET %s: a range from %d answered Content-Range %q", redact(url), have, cr)
		}
		if i := strings.LastIndexByte(cr, '/'); size >= 0 && cr[i+1:] != strconv.FormatInt(size, 10) {
			return 0, false, fmt.Errorf("%w: GET %s: Content-Range %q, not of the %d bytes declared", errSize, redact(url), cr, size)
		}
		return have, false, nil
	case http.StatusRequestedRangeNotSatisfiable:
		// What part holds is already the whole file.
		if cr := resp.Header.Get("Content-Range"); cr == "bytes */"+strconv.FormatInt(have, 10) {
			return have, true, nil
		}
		// part holds more than the file, or other bytes: start again.
		if err := f.Truncate(0); err != nil {
			return 0, false, err
		}
		return 0, false, errRestart
	case http.StatusNotFound, http.StatusForbidden:
		e := readAPIError(resp)
		return 0, false, fmt.Errorf("%w: %v", errLinkGone, e)
	default:
		return 0, false, readAPIError(resp)
	}
}

// declaredTotal is the size of the whole file resp's body ends: have and
// its Content-Length, or size when it declares none (-1: unknown, bounded
// by -max-download); errSize when it declares another size than size.
func declaredTotal(resp *http.Response, url string, have, size int64) (int64, error) {
	total := have + resp.ContentLength
	switch {
	case resp.ContentLength >= 0 && size >= 0 && total != size:
		return 0, fmt.Errorf("%w: GET %s declares %d bytes, not the %d its manifest lists", errSize, redact(url), total, size)
	case resp.ContentLength < 0:
		total = size
	}
	return total, nil
}

// receive writes body into f after the have bytes it holds, never past
// total (-1: unknown), and syncs it. It returns tag, the validator of
// body's bytes, also when body breaks off or falls short: what f holds
// is then a start of them, to resume.
func receive(f *os.File, body io.Reader, url, tag string, have, total int64, onBytes func(int)) (string, error) {
	buf := make([]byte, 256<<10)
	written := have
	for {
		if total >= 0 && int64(len(buf)) > total-written+1 {
			buf = buf[:total-written+1]
		}
		n, rerr := body.Read(buf)
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
			return tag, rerr
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
			return tag, fmt.Errorf("GET %s: %d bytes of %d", redact(url), st.Size(), total)
		}
	}
	return tag, nil
}

// redact is a signed link without its query (the signature), for messages.
func redact(url string) string {
	if i := strings.IndexByte(url, '?'); i >= 0 {
		return url[:i]
	}
	return url
}
