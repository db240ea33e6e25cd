package wazero

import (
	"fmt"

	"github.com/valyala/fastjson"

	"github.com/lectern-api/lectern/shared/jsonenc"
)

// The JSON of the messages of docs/edge.md, written and read without
// reflection: the host's share of an edge request's CPU is mostly these
// two conversions per module call.
//
// worker/pipeline's codec is this one's twin, the guest's half: it reads
// what this writes and writes what this reads, so beyond the header pairs
// they share no code to fold: the guest's decoder is a scanner of its own
// for TinyGo's small stack, the host's is fastjson. Both are held to
// shared/testdata/edge-messages.txt (TestMessagesSchema).

// message is a message the host sends.
type message interface {
	AppendJSON(dst []byte) []byte
}

func (m StartMessage) AppendJSON(b []byte) []byte {
	b = append(b, '{')
	b = jsonenc.Key(b, "method")
	b = jsonenc.String(b, m.Method)
	b = jsonenc.Key(b, "path")
	b = jsonenc.String(b, m.Path)
	b = jsonenc.Key(b, "query")
	b = jsonenc.String(b, m.Query)
	b = appendHeaders(b, m.Headers)
	b = jsonenc.Key(b, "now")
	b = jsonenc.Int(b, m.Now)
	if m.BodySHA256 != "" {
		b = jsonenc.Key(b, "bodySha256")
		b = jsonenc.String(b, m.BodySHA256)
	}
	return append(b, '}')
}

func (m ResumeMessage) AppendJSON(b []byte) []byte {
	b = append(b, '{')
	b = jsonenc.Key(b, "handle")
	b = jsonenc.Int(b, m.Handle)
	b = jsonenc.Key(b, "status")
	b = jsonenc.Int(b, int64(m.Status))
	if len(m.Headers) > 0 {
		b = appendHeaders(b, m.Headers)
	}
	if m.Body != nil {
		b = jsonenc.Key(b, "body")
		b = jsonenc.String(b, *m.Body)
	}
	if m.Error != "" {
		b = jsonenc.Key(b, "error")
		b = jsonenc.String(b, m.Error)
	}
	b = jsonenc.Key(b, "now")
	b = jsonenc.Int(b, m.Now)
	return append(b, '}')
}

func (m wakeMessage) AppendJSON(b []byte) []byte {
	b = append(b, '{')
	b = jsonenc.Key(b, "handle")
	b = jsonenc.Int(b, m.Handle)
	b = jsonenc.Key(b, "wake")
	b = jsonenc.Bool(b, m.Wake)
	b = jsonenc.Key(b, "now")
	b = jsonenc.Int(b, m.Now)
	return append(b, '}')
}

func (m controlMessage) AppendJSON(b []byte) []byte {
	b = append(b, '{')
	b = jsonenc.Key(b, "op")
	b = jsonenc.String(b, m.Op)
	b = jsonenc.Key(b, "now")
	b = jsonenc.Int(b, m.Now)
	if m.Body != "" {
		b = jsonenc.Key(b, "body")
		b = jsonenc.String(b, m.Body)
	}
	return append(b, '}')
}

func appendHeaders(b []byte, h [][2]string) []byte {
	b = jsonenc.Key(b, "headers")
	return jsonenc.Pairs(b, h, func(kv [2]string) (string, string) { return kv[0], kv[1] })
}

// parseOutput reads an output message; its strings are copied out of raw.
func parseOutput(p *fastjson.Parser, raw []byte) (*Output, error) {
	v, err := p.ParseBytes(raw)
	if err != nil {
		return nil, err
	}
	o, err := v.Object()
	if err != nil {
		return nil, err
	}
	out := new(Output)
	o.Visit(func(key []byte, m *fastjson.Value) {
		if err != nil {
			return
		}
		switch string(key) {
		case "kind":
			out.Kind, err = str(m)
		case "handle":
			out.Handle, err = m.Int64()
		case "status":
			out.Status, err = m.Int()
		case "headers":
			out.Headers, err = headers(m)
		case "body":
			out.Body, err = str(m)
		case "passthrough":
			out.Passthrough, err = m.Bool()
		case "method":
			out.Method, err = str(m)
		case "url":
			out.URL, err = str(m)
		case "forward":
			out.Forward, err = m.Bool()
		case "signatures":
			out.Signatures, err = strs(m)
		case "retry":
			out.Retry, err = retry(m)
		case "refresh":
			var rf *fastjson.Object
			if rf, err = m.Object(); err != nil {
				return
			}
			out.Refresh = new(Refresh)
			rf.Visit(func(k []byte, v *fastjson.Value) {
				switch {
				case err != nil:
				case string(k) == "handle":
					out.Refresh.Handle, err = v.Int64()
				case string(k) == "url":
					out.Refresh.URL, err = str(v)
				case string(k) == "retry":
					out.Refresh.Retry, err = retry(v)
				}
			})
			if err == nil && (out.Refresh.Handle <= 0 || out.Refresh.URL == "") {
				err = fmt.Errorf("refresh %s without a handle or url", m)
			}
		case "background":
			out.Background, err = background(m)
		case "lease":
			out.Lease, err = leaseUse(m)
		case "wake":
			var hs []*fastjson.Value
			if hs, err = m.Array(); err == nil {
				for _, h := range hs {
					var n int64
					if n, err = h.Int64(); err != nil {
						return
					}
					out.Wake = append(out.Wake, n)
				}
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func strs(v *fastjson.Value) ([]string, error) {
	arr, err := v.Array()
	if err != nil {
		return nil, err
	}
	out := make([]string, len(arr))
	for i, e := range arr {
		if out[i], err = str(e); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func str(v *fastjson.Value) (string, error) {
	b, err := v.StringBytes()
	return string(b), err
}

// retry reads a subrequest's "retry" mark: retryAny or retryUnsent.
func retry(v *fastjson.Value) (string, error) {
	s, err := str(v)
	if err == nil && s != retryAny && s != retryUnsent {
		err = fmt.Errorf("retry %s is neither %q nor %q", v, retryAny, retryUnsent)
	}
	return s, err
}

func headers(v *fastjson.Value) ([][2]string, error) {
	arr, err := v.Array()
	if err != nil {
		return nil, err
	}
	h := make([][2]string, 0, len(arr))
	for _, e := range arr {
		pair, err := e.Array()
		if err != nil || len(pair) != 2 {
			return nil, fmt.Errorf("header %s is not a [name, value] pair", e)
		}
		name, err1 := pair[0].StringBytes()
		value, err2 := pair[1].StringBytes()
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("header %s is not a [name, value] pair", e)
		}
		h = append(h, [2]string{string(name), string(value)})
	}
	return h, nil
}

// background reads an output's "background": a subrequest tied to no
// client request.
func background(v *fastjson.Value) (*Background, error) {
	o, err := v.Object()
	if err != nil {
		return nil, err
	}
	bg := new(Background)
	o.Visit(func(k []byte, v *fastjson.Value) {
		if err != nil {
			return
		}
		switch string(k) {
		case "handle":
			bg.Handle, err = v.Int64()
		case "method":
			bg.Method, err = str(v)
		case "url":
			bg.URL, err = str(v)
		case "headers":
			bg.Headers, err = headers(v)
		case "body":
			bg.Body, err = str(v)
		case "signatures":
			bg.Signatures, err = strs(v)
		case "retry":
			bg.Retry, err = retry(v)
		}
	})
	if err == nil && (bg.Handle <= 0 || bg.Method == "" || bg.URL == "") {
		err = fmt.Errorf("background %s without a handle, method or url", v)
	}
	return bg, err
}

// leaseUse reads a leased 304's "lease": the lease and its count so far.
func leaseUse(v *fastjson.Value) (*LeaseUse, error) {
	o, err := v.Object()
	if err != nil {
		return nil, err
	}
	u := new(LeaseUse)
	o.Visit(func(k []byte, v *fastjson.Value) {
		if err != nil {
			return
		}
		switch string(k) {
		case "id":
			u.ID, err = str(v)
		case "used":
			u.Used, err = v.Int64()
		}
	})
	if err == nil && (u.ID == "" || u.Used < 1) {
		err = fmt.Errorf("lease %s without an id or a count", v)
	}
	return u, err
}
