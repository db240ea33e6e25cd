package jsonbody

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestObject(t *testing.T) {
	type out struct {
		s    string
		n    int64
		i    int
		b    bool
		ss   []string
		null *int64
		raw  json.RawMessage
	}
	fields := func(o *out) map[string]Field {
		return map[string]Field{"s": String(&o.s), "n": Int64(&o.n), "i": Int(&o.i), "b": Bool(&o.b), "ss": Strings(&o.ss),
			"null": NullableInt64(&o.null), "raw": Raw(&o.raw)}
	}
	tests := []struct {
		name, body, param, message string
	}{
		{"good", `{"s":"x","n":-3,"i":7,"b":true,"ss":["a"],"null":null,"raw":{"a":{"a":1}}}`, "", ""},
		{"empty object", `{}`, "", ""},
		{"duplicate", `{"s":"a","s":"b"}`, "s", `The member "s" appears more than once.`},
		{"duplicate, nested", `{"raw":{"a":1,"b":{"c":1,"c":2}}}`, "raw.b.c", `The member "raw.b.c" appears more than once.`},
		{"duplicate, in an array", `{"raw":[{"a":1},{"a":1,"a":2}]}`, "raw[1].a", ""},
		{"same name in two objects", `{"raw":[{"a":1},{"a":1}],"s":"a"}`, "", ""},
		{"unknown", `{"S":"x"}`, "S", `Unknown member "S".`},
		{"string wanted", `{"s":1}`, "s", "s must be a string."},
		{"integer wanted", `{"n":"1"}`, "n", "n must be an integer."},
		{"fraction", `{"n":1.5}`, "n", "n must be an integer."},
		{"exponent", `{"i":1e3}`, "i", "i must be an integer."},
		{"too big", `{"n":99999999999999999999}`, "n", "n must be an integer."},
		{"bool wanted", `{"b":"yes"}`, "b", "b must be true or false."},
		{"array of strings wanted", `{"ss":["a",1]}`, "ss", "ss must be an array of strings."},
		{"null array", `{"ss":null}`, "ss", "ss must be an array of strings."},
		{"null string", `{"s":null}`, "s", "s must be a string."},
		{"not an object", `[1]`, "body", "The request body must be a JSON object."},
		{"null body", `null`, "body", "The request body must be a JSON object."},
		{"trailing", `{} {}`, "body", "The request body must be one JSON object, with nothing after it."},
		{"not JSON", `{"s":`, "body", "The request body is not valid JSON."},
	}
	for _, tt := range tests {
		var o out
		_, err := Object([]byte(tt.body), "", fields(&o))
		switch {
		case tt.param == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.param != "" && (err == nil || err.Parameter != tt.param || tt.message != "" && err.Message != tt.message):
			t.Errorf("%s: got %+v, want parameter %s, message %q", tt.name, err, tt.param, tt.message)
		}
		if err != nil && (strings.Contains(err.Message, "Go ") || strings.Contains(err.Message, "unmarshal")) {
			t.Errorf("%s: a Go error in the message: %s", tt.name, err.Message)
		}
	}
	var o out
	present, err := Object([]byte(`{"s":"x","n":-3,"i":7,"b":true,"ss":[],"null":5,"raw":[1]}`), "", fields(&o))
	if err != nil || o.s != "x" || o.n != -3 || o.i != 7 || !o.b || o.ss == nil || len(o.ss) != 0 || o.null == nil || *o.null != 5 ||
		string(o.raw) != "[1]" || len(present) != 7 {
		t.Errorf("got %+v %v %v", o, present, err)
	}
	// A nested object names its members under the prefix.
	_, err = Object([]byte(`{"calls":"x"}`), "quota.", map[string]Field{"calls": NullableInt64(&o.null)})
	if err == nil || err.Parameter != "quota.calls" || err.Message != "quota.calls must be an integer or null." {
		t.Errorf("nested: %+v", err)
	}
	_, err = Object([]byte(`7`), "quota.", map[string]Field{"calls": NullableInt64(&o.null)})
	if err == nil || err.Parameter != "quota" || err.Message != "quota must be a JSON object." {
		t.Errorf("nested, not an object: %+v", err)
	}
}
