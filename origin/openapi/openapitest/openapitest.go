// Package openapitest walks a decoded OpenAPI description, for the tests
// of the generator (origin/openapi) and of the route that serves it
// (origin/server).
package openapitest

// At walks a decoded JSON document along keys.
func At(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// Strs is a decoded JSON array of strings; other members are "".
func Strs(v any) []string {
	a, _ := v.([]any)
	out := make([]string, 0, len(a))
	for _, x := range a {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// Params is the parameters of a decoded operation.
func Params(op map[string]any) []any {
	ps, _ := op["parameters"].([]any)
	return ps
}

// Must is b, and panics on err.
func Must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
