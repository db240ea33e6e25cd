package httpsrv

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/lectern-api/lectern/shared/apierr"
)

// Listener returns ln with its connections watched for the answers
// net/http writes on its own, before and without any handler: a request
// it cannot read (400, for a malformed request line or header field, a
// bad Host, an unsupported HTTP version), header fields over the limit
// (431), an unknown transfer coding (501) and an Expect it does not
// support (417). Each is replaced, on the wire, by the API's error body:
// 400 BAD_REQUEST with a fresh request id (the spec has no 417, 431, 501
// or 505; the client's request is at fault, so a 400, as the edge module
// answers header fields over its own limit). Every other byte passes
// unchanged.
//
// net/http (server.go, conn.serve) writes the first four with one
// fmt.Fprintf straight to the connection, in a fixed shape: a status
// line, exactly "Content-Type: text/plain; charset=utf-8" and
// "Connection: close", an empty line and a text body. An answer of a
// handler cannot have that shape, since net/http writes it with a Date
// (and a length or chunking) after the handler's own fields; so a write
// is replaced only when it is entirely one of those answers. The 417 goes
// through net/http's response writer, in one write of its head; no
// handler here answers 417.
func Listener(ln net.Listener, cfg Config) net.Listener { return &listener{ln, cfg} }

type listener struct {
	net.Listener
	cfg Config
}

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &conn{Conn: c, cfg: l.cfg}, nil
}

// conn replaces net/http's own answers written on it.
type conn struct {
	net.Conn
	cfg Config
}

// cannedHeaders follows the status line of each answer net/http writes
// straight to the connection.
const cannedHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

func (c *conn) Write(p []byte) (int, error) {
	// Every answer recognised is short; anything longer is written as is
	// after one comparison.
	if len(p) > 512 || !bytes.HasPrefix(p, []byte("HTTP/1.")) {
		return c.Conn.Write(p)
	}
	e := recognise(p)
	if e == nil {
		return c.Conn.Write(p)
	}
	id := c.cfg.newID()
	c.cfg.logger().Info("net/http refused a request", "requestId", id, "remote", c.RemoteAddr().String(),
		"answer", string(p[:bytes.IndexByte(p, '\r')]))
	if _, err := c.Conn.Write(answer(p[:len("HTTP/1.x")], e, id)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// recognise returns the error body that replaces p, when p is entirely
// one of net/http's own answers.
func recognise(p []byte) *apierr.Error {
	line, rest, ok := bytes.Cut(p, []byte("\r\n"))
	if !ok {
		return nil
	}
	if len(line) < len("HTTP/1.x 400 ") || line[len("HTTP/1.x")] != ' ' {
		return nil
	}
	status := line[len("HTTP/1.x "):]
	if bytes.Equal(status, []byte("417 Expectation Failed")) {
		// A head written by the response writer: its fields, then an
		// empty line, with no body.
		if bytes.HasSuffix(rest, []byte("\r\n\r\n")) && bytes.Contains(rest, []byte("Content-Length: 0\r\n")) &&
			bytes.Count(rest, []byte("\r\n\r\n")) == 1 {
			return &apierr.Error{Code: apierr.BadRequest, Parameter: "Expect",
				Message: "The Expect header field is not supported; only 100-continue is."}
		}
		return nil
	}
	body, ok := bytes.CutPrefix(p[len(line):], []byte(cannedHeaders))
	if !ok {
		return nil
	}
	switch string(status) {
	case "400 Bad Request":
		if bytes.Equal(body, status) {
			return &apierr.Error{Code: apierr.BadRequest, Message: "The request could not be read as HTTP/1.1."}
		}
	case "431 Request Header Fields Too Large":
		if bytes.Equal(body, status) {
			// The edge module's words for the same refusal
			// (worker/pipeline tooLarge).
			return &apierr.Error{Code: apierr.BadRequest, Parameter: "headers", Message: "The request's header fields are too large."}
		}
	case "501 Not Implemented":
		if bytes.Equal(body, []byte("Unsupported transfer encoding")) {
			return &apierr.Error{Code: apierr.BadRequest, Parameter: "Transfer-Encoding",
				Message: "The request's transfer coding is not supported."}
		}
	default:
		// net/http's statusError: "<code> <text>: <reason>" as the
		// status line and again as the body.
		if !bytes.Equal(body, status) {
			return nil
		}
		if _, reason, ok := bytes.Cut(status, []byte(": ")); ok {
			return statusErrors[string(reason)]
		}
	}
	return nil
}

// statusErrors are the reasons net/http gives with a status when it
// refuses a request it read (server.go, readRequest).
var statusErrors = map[string]*apierr.Error{
	"unsupported protocol version": {Code: apierr.BadRequest, Message: "The request's HTTP version is not supported."},
	"missing required Host header": {Code: apierr.BadRequest, Parameter: "Host", Message: "The request has no Host header field."},
	"malformed Host header":        {Code: apierr.BadRequest, Parameter: "Host", Message: "The request's Host header field is malformed."},
	"invalid header name":          {Code: apierr.BadRequest, Parameter: "headers", Message: "The request has a malformed header field name."},
	"invalid header value":         {Code: apierr.BadRequest, Parameter: "headers", Message: "The request has a malformed header field value."},
}

// answer is the whole answer for e, as origin/server writeError writes an
// error, closing the connection as net/http's did.
func answer(proto []byte, e *apierr.Error, id string) []byte {
	body := e.AppendJSON(nil, id)
	b := make([]byte, 0, 256+len(body))
	b = append(b, proto...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(e.Status()), 10)
	b = append(b, ' ')
	b = append(b, http.StatusText(e.Status())...)
	b = append(b, "\r\nCache-Control: private\r\nConnection: close\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, "\r\nContent-Type: application/json\r\nDate: "...)
	b = time.Now().UTC().AppendFormat(b, http.TimeFormat)
	b = append(b, "\r\nX-Request-Id: "...)
	b = append(b, id...)
	b = append(b, "\r\n\r\n"...)
	return append(b, body...)
}

// CloseWrite lets net/http half-close the connection after a 431, as it
// does on a TCP connection, so the client reads the answer before the
// close.
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// ReadFrom keeps the connection's own copy (sendfile, splice) for bodies
// net/http copies to it; those are never answers of net/http's own.
func (c *conn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}
