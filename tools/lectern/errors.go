package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	lapi "github.com/lectern-api/lectern/tools/lectern/api"
)

// apiError is an answer in the API's error body.
type apiError struct {
	Status     int
	Code       string
	Message    string
	RetryAfter time.Duration // from Retry-After; 0 when absent
}

func (e *apiError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("HTTP %d", e.Status)
	}
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

// readAPIError reads resp's error body (the body is consumed).
func readAPIError(resp *http.Response) *apiError {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return apiErrorOf(resp.StatusCode, resp.Header, b)
}

// apiErrorOf is the refusal of an answer of status, header h and body b
// (the API's error body; the typed client's Error).
func apiErrorOf(status int, h http.Header, b []byte) *apiError {
	e := &apiError{Status: status}
	var body lapi.Error
	if json.Unmarshal(b, &body) == nil {
		e.Code, e.Message = string(body.Error.Code), body.Error.Message
	}
	if s, err := strconv.Atoi(strings.TrimSpace(h.Get("Retry-After"))); err == nil && s >= 0 {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	return e
}

// stoppedError ends a sync cleanly short of complete: what it holds is
// verified and kept; Reason says why in words a person acts on.
type stoppedError struct{ Reason string }

func (e *stoppedError) Error() string { return e.Reason }

// maxWait is the longest Retry-After a sync waits out; a longer one stops
// it cleanly.
const maxWait = 90 * time.Second

// stopFor is the clean stop an API refusal calls for, or nil when it is
// not one: a monthly quota spent (retrying cannot succeed before the
// month ends), an hourly cap whose reset is further than maxWait.
func stopFor(e *apiError) *stoppedError {
	switch e.Code {
	case "QUOTA_EXCEEDED", "EXPORT_LIMIT":
		return &stoppedError{Reason: fmt.Sprintf("a monthly quota is spent (%s: %s); the mirror holds what it verified, run again after the quota resets", e.Code, e.Message)}
	case "RATE_LIMITED":
		if e.RetryAfter > maxWait {
			return &stoppedError{Reason: fmt.Sprintf("an hourly cap is reached (%s); run again in %v", e.Message, e.RetryAfter)}
		}
	}
	return nil
}

// stopOr is err as a clean stop when it is a refusal that calls for one
// (stopFor), else err wrapped with what was being done.
func stopOr(err error, doing string) error {
	var e *apiError
	if errors.As(err, &e) {
		if stop := stopFor(e); stop != nil {
			return stop
		}
	}
	return fmt.Errorf("%s: %w", doing, err)
}

// rateLimit reads one item of a RateLimit field ("name";r=remaining;t=seconds):
// the remaining count, and whether the item was there.
func rateLimit(h http.Header, name string) (int64, bool) {
	for _, v := range h.Values("RateLimit") {
		for _, item := range strings.Split(v, ",") {
			parts := strings.Split(strings.TrimSpace(item), ";")
			if len(parts) < 2 || strings.Trim(parts[0], `"`) != name {
				continue
			}
			for _, p := range parts[1:] {
				if r, ok := strings.CutPrefix(strings.TrimSpace(p), "r="); ok {
					if n, err := strconv.ParseInt(r, 10, 64); err == nil {
						return n, true
					}
				}
			}
		}
	}
	return 0, false
}
