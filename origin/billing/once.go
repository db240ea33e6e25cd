package billing

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/shared/edgesig"
)

// A request is billed once per organisation whatever origin serves it
// (docs/decisions/meters.md, "Billed once"): the edge sends a request to
// another origin when the first does not answer in time, with the same
// request id and the same signing time, and the first may still serve it
// later (a frozen process resumes). Its key (meter.Op.Once) is made of
// what the edge signed, time included, so no client can make two of its
// requests share one: a client's own X-Request-Id sent twice is two
// requests, signed at two times.

// Once is the key of an edge call's bill and when the edge signed it.
type Once struct {
	Key    string
	Signed time.Time
}

// OnceOf is the key of the edge call m (its purpose, method, target,
// body, token and request id: everything signed but the receiving host,
// which differs between the origins a request is sent to) signed at
// unixMilli, with its If-None-Match (not signed, but it decides what a
// GET bills: two requests differing in it are two).
func OnceOf(m *edgesig.Message, unixMilli int64, ifNoneMatch string) Once {
	h := sha256.New()
	for _, f := range []string{m.Purpose, m.Method, m.Target, m.Body, m.Auth, m.RequestID, strconv.FormatInt(unixMilli, 10), ifNoneMatch} {
		h.Write(strconv.AppendInt(nil, int64(len(f)), 10))
		h.Write([]byte{':'})
		h.Write([]byte(f))
	}
	return Once{Key: hex.EncodeToString(h.Sum(nil)[:16]), Signed: time.UnixMilli(unixMilli)}
}

type onceKey struct{}

// WithOnce returns ctx carrying o: every bill of the request is applied
// under its key.
func WithOnce(ctx context.Context, o Once) context.Context {
	return context.WithValue(ctx, onceKey{}, o)
}

// once sets op's key from ctx. The meters refuse it when it was signed
// more than meter.OnceMaxAge before their transaction (an origin frozen
// for most of an hour between the request and its bill; the edge gave up
// on it long ago): meter.ErrTooOld, a 500 that no client waits for.
func once(ctx context.Context, op *meter.Op) {
	if o, ok := ctx.Value(onceKey{}).(Once); ok {
		op.Once, op.OnceSigned = o.Key, o.Signed
	}
}
