// Package ratelimit writes the RateLimit-Policy and RateLimit fields
// (IETF draft-ietf-httpapi-ratelimit-headers) the origin's answers carry
// for every capped meter a request bills, and the edge's leased 304s
// carry too: one writer, so the two tiers' fields cannot drift apart.
// It allocates nothing but what dst grows by, and builds under TinyGo.
package ratelimit

import (
	"strconv"
	"time"
)

// AppendPolicy appends one item of RateLimit-Policy: "name";q=quota;w=window
// (the window in seconds).
func AppendPolicy(dst []byte, name string, quota, window int64) []byte {
	dst = append(dst, '"')
	dst = append(dst, name...)
	dst = append(dst, `";q=`...)
	dst = strconv.AppendInt(dst, quota, 10)
	dst = append(dst, ";w="...)
	return strconv.AppendInt(dst, window, 10)
}

// AppendState appends one item of RateLimit: "name";r=remaining;t=seconds
// (the seconds until the meter resets, Seconds).
func AppendState(dst []byte, name string, remaining, seconds int64) []byte {
	dst = append(dst, '"')
	dst = append(dst, name...)
	dst = append(dst, `";r=`...)
	dst = strconv.AppendInt(dst, remaining, 10)
	dst = append(dst, ";t="...)
	return strconv.AppendInt(dst, seconds, 10)
}

// Seconds is d, the time until a reset, in whole seconds rounded up and
// at least 1.
func Seconds(d time.Duration) int64 {
	return max(1, int64((d+time.Second-1)/time.Second))
}
