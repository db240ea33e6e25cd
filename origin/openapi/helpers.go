// Schema helpers: references, the shared scalar schemas, and the object
// and list-envelope builders the schemas are written with.

package openapi

import (
	"maps"
	"slices"
)

// oaRef refers to the component name of kind (schemas, headers).
func oaRef(kind, name string) oaObj { return oaObj{"$ref": "#/components/" + kind + "/" + name} }

// oaHeaderRefs is a response's headers object: a reference to each of the
// components/headers named.
func oaHeaderRefs(names ...string) oaObj {
	hs := make(oaObj, len(names))
	for _, n := range names {
		hs[n] = oaRef("headers", n)
	}
	return hs
}

// Scalar schemas, shared by every schema that uses them: never modify one.
var (
	oaString  = oaObj{"type": "string"}
	oaInt     = oaObj{"type": "integer"}
	oaCount   = oaObj{"type": "integer", "minimum": 0}
	oaBool    = oaObj{"type": "boolean"}
	oaStrings = oaObj{"type": "array", "items": oaObj{"type": "string"}}

	oaNullStrings = oaObj{"type": []string{"array", "null"}, "items": oaObj{"type": "string"}}
	oaNullString  = oaObj{"type": []string{"string", "null"}}
	oaClassNum    = oaObj{"type": "integer", "minimum": 1}
	oaDateTime    = oaObj{"type": "string", "format": "date-time"}
)

// oaStrict is a closed object: no members beyond props.
func oaStrict(required []string, props oaObj) oaObj {
	return oaObj{"type": "object", "additionalProperties": false, "required": required, "properties": props}
}

// oaOpen is an object whose other members are not fixed yet (spec: "not
// shown"): it requires the members the spec names.
func oaOpen(desc string, required []string, props oaObj) oaObj {
	o := oaObj{"type": "object", "additionalProperties": true, "description": desc, "properties": props}
	if len(required) > 0 {
		o["required"] = required
	}
	return o
}

// oaListKeys are the list envelope's members, all required.
var oaListKeys = []string{"items", "total", "pageNum", "totalPages", "hasMore", "nextCursor", "contentVersion", "_license"}

// oaShaped is an object of a route another file renders: every member it
// writes today is required and typed; members added later are allowed, so
// the description may lag an addition but never contradicts a response.
func oaShaped(desc string, props oaObj) oaObj {
	req := make([]string, 0, len(props))
	for k := range props {
		req = append(req, k)
	}
	slices.Sort(req)
	o := oaObj{"type": "object", "additionalProperties": true, "required": req, "properties": props}
	if desc != "" {
		o["description"] = desc
	}
	return o
}

// oaWith adds optional members to an object schema.
func oaWith(o oaObj, optional oaObj) oaObj {
	props := maps.Clone(o["properties"].(oaObj))
	maps.Copy(props, optional)
	o["properties"] = props
	return o
}

// oaArray is an array of items.
func oaArray(items oaObj) oaObj { return oaObj{"type": "array", "items": items} }

// oaList is the list envelope (spec: Resources, List envelope) around
// items of the schema named item.
func oaList(desc, item string, closed bool) oaObj {
	props := oaObj{
		"items":          oaObj{"type": "array", "items": oaRef("schemas", item)},
		"total":          oaObj{"type": "integer", "minimum": 0, "description": "Count within the caller's granted set, not the page size."},
		"pageNum":        oaObj{"type": "integer", "minimum": 1},
		"totalPages":     oaObj{"type": "integer", "minimum": 1},
		"hasMore":        oaObj{"type": "boolean", "description": "True while more pages remain; stop when false."},
		"nextCursor":     oaObj{"type": []string{"string", "null"}, "description": "Pass back verbatim as cursor; null on the last page."},
		"contentVersion": oaRef("schemas", "ContentVersion"),
		"_license":       oaRef("schemas", "LicenseEnvelope"),
	}
	return oaObj{"type": "object", "description": desc, "required": oaListKeys, "properties": props, "additionalProperties": !closed}
}

// oaWithDesc sets o's description.
func oaWithDesc(desc string, o oaObj) oaObj {
	o["description"] = desc
	return o
}
