// The operations of the route table's paths: security, x-service-cost,
// and the path, query, header and body parameters each route's rules
// describe.

package openapi

import (
	"strconv"

	"github.com/lectern-api/lectern/shared/id"
	"github.com/lectern-api/lectern/shared/param"
	"github.com/lectern-api/lectern/shared/route"
	"github.com/lectern-api/lectern/shared/scope"
)

// oaOperation describes one route.
func oaOperation(rt *route.Route, e oaEnums) oaObj {
	meters := rt.Cost.Meters
	if meters == nil {
		meters = []string{}
	}
	op := oaObj{
		"operationId": rt.OperationID,
		"summary":     rt.Summary,
		"tags":        []string{oaTag(rt.ID)},
		"x-service-cost": oaObj{
			"typicalBytes": rt.Cost.TypicalBytes,
			"meters":       meters,
			"note":         rt.Cost.Note,
		},
		"responses": oaResponses(rt),
	}
	switch {
	case rt.Scope == "":
		op["security"] = []any{} // none: unauthenticated
	case rt.Learner:
		op["security"] = []any{oaObj{oaSchemeLearner: []string{scope.Full(rt.Scope)}}}
	default:
		op["security"] = []any{oaObj{oaSchemeClient: []string{scope.Full(rt.Scope)}}}
	}
	if rt.ID == route.Testprep || rt.ID == route.TestprepItems {
		op["x-service-sections"] = e.byTest
	}
	if rt.Extension {
		op["x-lectern-extension"] = true
	}
	var params []any
	body := oaObj{"type": "object", "additionalProperties": false, "properties": oaObj{}}
	var required []string
	hasBody := false
	for i := range rt.Params {
		p := &rt.Params[i]
		if p.In == route.Body {
			hasBody = true
			body["properties"].(oaObj)[p.Name] = oaBodySchema(p)
			if p.Required {
				required = append(required, p.Name)
			}
			continue
		}
		params = append(params, oaParameter(p, e))
	}
	if rt.Method == "GET" && rt.Validator != route.NoETag {
		params = append(params, oaIfNoneMatch)
	}
	if params != nil {
		op["parameters"] = params
	}
	if hasBody {
		if required != nil {
			body["required"] = required
		}
		op["requestBody"] = oaObj{
			"required": required != nil,
			"content":  oaObj{"application/json": oaObj{"schema": body}},
		}
	}
	return op
}

// oaIfNoneMatch is the request header of every GET with an ETag, its
// last parameter: typed clients then accept the validator they kept.
var oaIfNoneMatch = oaObj{"name": "If-None-Match", "in": "header", "required": false,
	"description": "An ETag this route answered before, or several, comma-separated, or *: a match answers 304 with an empty body.",
	"schema":      oaObj{"type": "string"}}

// oaParameter describes a path or query parameter from its rule.
func oaParameter(p *route.Param, e oaEnums) oaObj {
	o := oaObj{"name": p.Name, "in": p.In.String(), "schema": oaParamSchema(p, e)}
	if p.Doc != "" {
		o["description"] = p.Doc
	}
	if p.In == route.Path || p.Required {
		o["required"] = true
	}
	if p.Kind == route.List {
		o["style"] = "form"
		o["explode"] = false
	}
	return o
}

func oaParamSchema(p *route.Param, e oaEnums) oaObj {
	enum := p.Enum
	switch p.Name {
	case "tier":
		enum = e.tiers
	case "test":
		enum = e.tests
	case "section":
		enum = e.sections
	}
	var s oaObj
	switch p.Kind {
	case route.Segment:
		switch p.Name {
		case "classNum":
			s = oaObj{"type": "integer", "minimum": 1, "maximum": 999999}
		case "subjectSlug":
			s = oaSlug()
		default:
			s = oaObj{"type": "string"}
		}
	case route.Enum:
		s = oaObj{"type": "string"}
	case route.Int:
		s = oaObj{"type": "integer", "minimum": p.Min, "maximum": p.Max}
	case route.Text:
		s = oaObj{"type": "string", "minLength": 1, "maxLength": p.MaxLen}
	case route.Slug:
		s = oaSlug()
	case route.Cursor:
		s = oaObj{"type": "string", "minLength": 1, "maxLength": param.MaxCursor}
	case route.List:
		return oaObj{"type": "array", "minItems": 1, "items": oaObj{"type": "string", "enum": enum}}
	default:
		s = oaObj{"type": "string"}
	}
	if enum != nil && (p.Kind == route.Enum || p.Kind == route.Segment) {
		s["enum"] = enum
	}
	if p.Default != "" {
		if p.Kind == route.Int {
			n, _ := strconv.Atoi(p.Default)
			s["default"] = n
		} else {
			s["default"] = p.Default
		}
	}
	return s
}

func oaSlug() oaObj {
	return oaObj{"type": "string", "pattern": "^[a-z0-9]+(-[a-z0-9]+)*$", "maxLength": id.MaxSlugLen}
}

// oaBodySchema describes a member of a JSON request body.
func oaBodySchema(p *route.Param) oaObj {
	var s oaObj
	switch p.Kind {
	case route.Strings:
		s = oaObj{"type": "array", "items": oaObj{"type": "string"}, "minItems": p.Min, "maxItems": p.Max}
	case route.Integer:
		s = oaObj{"type": "integer", "minimum": p.Min}
		if p.Default != "" {
			n, _ := strconv.Atoi(p.Default)
			s["default"] = n
		}
	case route.Number:
		s = oaObj{"type": "number", "minimum": p.Min, "maximum": p.Max}
	default:
		s = oaObj{"type": "string", "minLength": 1}
		if p.MaxLen > 0 {
			s["maxLength"] = p.MaxLen
		}
	}
	if p.Doc != "" {
		s["description"] = p.Doc
	}
	return s
}
