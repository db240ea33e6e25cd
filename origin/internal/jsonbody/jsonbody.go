// Package jsonbody decodes JSON request bodies as strictly as the public
// API reads its own (shared/param): one JSON object, each member at most
// once (at every depth), no unknown member, each value of the JSON type
// its field takes; and every refusal is the API's 400 BAD_REQUEST naming
// the member and the JSON type it must have, never Go's type names
// (encoding/json alone takes the last of repeated members, matches names
// case-insensitively and says "cannot unmarshal number into Go value of
// type string"). The admin API decodes every body with it, and so may the
// identity provider's client registration.
package jsonbody

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"slices"
	"strconv"

	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/param"
)

// Field is where Object stores one member, and the JSON it accepts; the
// constructors below are the only ones, so a member of a type Object
// cannot read does not compile.
type Field struct {
	kind string                     // the JSON it takes, for messages
	set  func(json.RawMessage) bool // stores raw, reporting whether it has the kind
}

// String takes a string.
func String(p *string) Field {
	return Field{"a string", func(raw json.RawMessage) bool { return raw[0] == '"' && json.Unmarshal(raw, p) == nil }}
}

// Int64 takes an integer (no fraction, no exponent) that fits.
func Int64(p *int64) Field {
	return Field{"an integer", func(raw json.RawMessage) bool {
		n, ok := param.Integer(string(raw))
		*p = n
		return ok
	}}
}

// Int takes an integer that fits an int.
func Int(p *int) Field {
	return Field{"an integer", func(raw json.RawMessage) bool {
		n, ok := param.Integer(string(raw))
		if ok && (n < math.MinInt || n > math.MaxInt) {
			return false
		}
		*p = int(n)
		return ok
	}}
}

// Bool takes true or false.
func Bool(p *bool) Field {
	return Field{"true or false", func(raw json.RawMessage) bool {
		return (raw[0] == 't' || raw[0] == 'f') && json.Unmarshal(raw, p) == nil
	}}
}

// Strings takes an array of strings (never null).
func Strings(p *[]string) Field {
	return Field{"an array of strings", func(raw json.RawMessage) bool {
		if raw[0] != '[' {
			return false
		}
		var v []string
		if json.Unmarshal(raw, &v) != nil {
			return false
		}
		if v == nil {
			v = []string{}
		}
		*p = v
		return true
	}}
}

// NullableInt64 takes an integer, or null (nil: no value).
func NullableInt64(p **int64) Field {
	return Field{"an integer or null", func(raw json.RawMessage) bool {
		if string(raw) == "null" {
			*p = nil
			return true
		}
		n, ok := param.Integer(string(raw))
		if ok {
			*p = &n
		}
		return ok
	}}
}

// Raw takes any JSON value (an object is checked by a nested Object).
func Raw(p *json.RawMessage) Field {
	return Field{"a JSON value", func(raw json.RawMessage) bool {
		*p = append((*p)[:0], raw...)
		return true
	}}
}

// Object decodes body, one JSON object, into fields (member name → its
// Field) and returns the names present. Names match
// exactly. prefix names an enclosing member for nested objects ("quota."):
// errors then name "quota.calls".
func Object(body []byte, prefix string, fields map[string]Field) (map[string]bool, *apierr.Error) {
	if dup, err := duplicate(body); err != nil {
		return nil, bodyError(prefix, "is not valid JSON")
	} else if dup != "" {
		return nil, &apierr.Error{Code: apierr.BadRequest, Parameter: prefix + dup,
			Message: "The member " + strconv.Quote(apierr.Clip(prefix+dup)) + " appears more than once."}
	}
	t := bytes.TrimSpace(body)
	if len(t) == 0 || t[0] != '{' {
		return nil, bodyError(prefix, "must be a JSON object")
	}
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(t))
	if err := dec.Decode(&m); err != nil {
		return nil, bodyError(prefix, "must be a JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, bodyError(prefix, "must be one JSON object, with nothing after it")
	}
	present := make(map[string]bool, len(m))
	for k, raw := range m {
		dst, ok := fields[k]
		if !ok {
			names := make([]string, 0, len(fields))
			for name := range fields {
				names = append(names, name)
			}
			slices.Sort(names)
			return nil, &apierr.Error{Code: apierr.BadRequest, Parameter: prefix + k, Allowed: names,
				Message: "Unknown member " + strconv.Quote(apierr.Clip(prefix+k)) + "."}
		}
		if !dst.set(raw) {
			return nil, &apierr.Error{Code: apierr.BadRequest, Parameter: prefix + k,
				Message: prefix + k + " must be " + dst.kind + "."}
		}
		present[k] = true
	}
	return present, nil
}

func bodyError(prefix, what string) *apierr.Error {
	if prefix == "" {
		return &apierr.Error{Code: apierr.BadRequest, Parameter: "body", Message: "The request body " + what + "."}
	}
	name := prefix[:len(prefix)-1]
	return &apierr.Error{Code: apierr.BadRequest, Parameter: name, Message: name + " " + what + "."}
}

// duplicate walks the JSON text b and returns the path of the first
// member that repeats a name of its object ("quota.calls",
// "items[2].id"), "" when none does, or an error when b is not JSON.
func duplicate(b []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	type frame struct {
		object bool
		base   string          // the path of the object or array
		seen   map[string]bool // an object's names so far
		cur    string          // an object's current member's path
		key    bool            // an object's next token is a name
		index  int             // an array's next element
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			if len(stack) != 0 {
				return "", errors.New("jsonbody: unexpected end")
			}
			return "", nil
		}
		if err != nil {
			return "", err
		}
		var top *frame
		if n := len(stack); n > 0 {
			top = stack[n-1]
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			if n := len(stack); n > 0 && stack[n-1].object {
				stack[n-1].key = true
			}
			continue
		}
		if top != nil && top.object && top.key {
			name, _ := tok.(string)
			p := name
			if top.base != "" {
				p = top.base + "." + name
			}
			if top.seen[name] {
				return p, nil
			}
			top.seen[name], top.cur, top.key = true, p, false
			continue
		}
		var path string // of the value tok begins
		switch {
		case top == nil:
		case top.object:
			path, top.key = top.cur, true
		default:
			path = top.base + "[" + strconv.Itoa(top.index) + "]"
			top.index++
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, base: path, seen: map[string]bool{}, key: true})
		case json.Delim('['):
			stack = append(stack, &frame{base: path})
		}
	}
}
