package server

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"
	"github.com/lectern-api/lectern/origin/billing"
	"github.com/lectern-api/lectern/shared/encoding"
	"github.com/lectern-api/lectern/shared/etag"
)

// Content answers: the If-None-Match match, the 304, and the 200 with its
// body compressed per Accept-Encoding (spec: Transport). Where the 304 is
// decided for a derived validator is validator.go.

// notModified reports whether the request's If-None-Match matches tag.
// Its field lines are combined into one list (RFC 9110 §5.3), as the edge
// combines them.
func notModified(r *http.Request, tag string) bool {
	inm := strings.Join(r.Header.Values("If-None-Match"), ", ")
	return inm != "" && tag != "" && etag.Match(inm, tag)
}

// writeNotModified answers 304 with an empty body, the validator and the
// content version (spec: Conditional requests §3); status is 304, or 204
// with the same headers to the edge's gate call, which answers the 304.
func writeNotModified(w http.ResponseWriter, req *request, tag string, bill billing.Bill, status int) {
	notModifiedHeaders(w.Header(), req.corpus.ContentVersion, tag, bill)
	edgeHeaders(w, req)
	w.WriteHeader(status)
}

// notModifiedHeaders sets a 304's own fields: the validator, the content
// version and the bill's. The lease endpoint sets the same for the 304s
// an edge answers under a lease (leaseHeaders).
func notModifiedHeaders(h http.Header, version, tag string, bill billing.Bill) {
	h.Set("ETag", tag)
	h.Set("X-Service-Content-Version", version)
	setAll(h, bill)
}

// writeContent answers 200 with body, compressed when the client accepts
// it and the body is at least 384 bytes (spec: Transport).
func writeContent(w http.ResponseWriter, r *http.Request, req *request, tag string, bill billing.Bill, body []byte) {
	contentHeaders(w, req, tag, bill)
	writeBody(w, r, http.StatusOK, body)
}

// contentHeaders sets a content answer's headers: the validator (none
// when tag is ""), the content version, the bill's and the edge's.
func contentHeaders(w http.ResponseWriter, req *request, tag string, bill billing.Bill) {
	h := w.Header()
	if tag != "" {
		h.Set("ETag", tag)
	}
	h.Set("X-Service-Content-Version", req.corpus.ContentVersion)
	setAll(h, bill)
	edgeHeaders(w, req)
}

// writeGzipped answers 200 with a body already gzip-compressed: what
// writeContent and writeBody do for a gzip answer (respond.go), without
// the compression. Every precompressed body is far over 384 bytes.
func writeGzipped(w http.ResponseWriter, req *request, tag string, bill billing.Bill, gz []byte) {
	contentHeaders(w, req, tag, bill)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Encoding", encoding.Gzip.String())
	h.Set("Content-Length", strconv.Itoa(len(gz)))
	w.WriteHeader(http.StatusOK)
	w.Write(gz)
}

func setAll(h http.Header, bill billing.Bill) {
	for _, kv := range bill.Headers() {
		h.Set(kv.Name, kv.Value)
	}
}

// writeBody writes a JSON body, compressed per Accept-Encoding.
func writeBody(w http.ResponseWriter, r *http.Request, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	coding := encoding.Negotiate(r.Header.Get("Accept-Encoding"))
	if coding == encoding.Identity || !encoding.Compressible(len(body)) {
		h.Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(status)
		w.Write(body)
		return
	}
	buf := bufPool.Get().(*bytes.Buffer)
	defer bufPool.Put(buf)
	buf.Reset()
	compress(buf, coding, body)
	h.Set("Content-Encoding", coding.String())
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

var (
	bufPool  = sync.Pool{New: func() any { return new(bytes.Buffer) }}
	gzipPool = sync.Pool{New: func() any { w, _ := gzip.NewWriterLevel(io.Discard, gzip.DefaultCompression); return w }}
	brPool   = sync.Pool{New: func() any { return brotli.NewWriterLevel(io.Discard, 4) }}
)

func compress(dst *bytes.Buffer, coding encoding.Coding, body []byte) {
	switch coding {
	case encoding.Gzip:
		zw := gzipPool.Get().(*gzip.Writer)
		zw.Reset(dst)
		zw.Write(body)
		zw.Close()
		gzipPool.Put(zw)
	case encoding.Br:
		bw := brPool.Get().(*brotli.Writer)
		bw.Reset(dst)
		bw.Write(body)
		bw.Close()
		brPool.Put(bw)
	}
}
