package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
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

// fetch downloads url into part, resuming what part already holds when
// etag (the validator of those bytes) is known: a Range from its size
// with If-Range, so a server whose bytes changed sends them whole. It
// returns the validator of what part now holds, whole. onStart is told
// where the download starts and the validator of the bytes coming (to
// keep for a resume) before any is written; onBytes every chunk written.
func fetch(ctx context.Context, c *http.Client, url, part, etag string, onStart func(have, total int64, etag string) error, onBytes func(int)) (string, error) {
	for attempt := 0; ; attempt++ {
		tag, err := fetchOnce(ctx, c, url, part, etag, onStart, onBytes)
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
func fetchOnce(ctx context.Context, c *http.Client, url, part, etag string, onStart func(have, total int64, etag string) error, onBytes func(int)) (string, error) {
	f, err := os.OpenFile(part, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return "", err
	}
	defer f.Close()
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
		if !strings.HasPrefix(resp.Header.Get("Content-Range"), "bytes "+strconv.FormatInt(have, 10)+"-") {
			return "", fmt.Errorf("GET %s: a range from %d answered Content-Range %q", redact(url), have, resp.Header.Get("Content-Range"))
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
	if resp.ContentLength < 0 {
		total = -1
	}
	newTag := resp.Header.Get("ETag")
	if onStart != nil {
		if err := onStart(have, total, newTag); err != nil {
			return "", err
		}
	}
	buf := make([]byte, 256<<10)
	for {
		n, rerr := resp.Body.Read(buf)
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
		if st, err := f.Stat(); err != nil || st.Size() != total {
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
