// Package openapi generates the OpenAPI 3.1 description (route 1) from
// shared/route's table, never written by hand: every route's path, method,
// operation id, summary, security, parameters, body, x-service-cost and
// responses come from its row. What the corpus decides — the tiers and
// test-prep values that are enumerated, and the x-service-sections map —
// comes from the loaded corpus (spec: route 1, "enumerated tiers and
// test-prep values are derived from the deployed corpus"), and its
// contentVersion is in info.x-content-version, so the bytes, and the ETag
// hashed from them, move with the corpus (spec: Versioning §4). Beside
// the table's routes it describes the signed download links under
// /files/ (oaDownloads), which no route row holds.
// origin/server serves the document.
package openapi

import (
	"bytes"
	"encoding/json"
	"maps"
	"strings"
	"sync/atomic"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/shared/etag"
	"github.com/lectern-api/lectern/shared/link"
	"github.com/lectern-api/lectern/shared/route"
)

// Version is the API version the description reports (spec:
// Versioning §1).
const Version = "1.0.0"

type oaObj = map[string]any

// Doc is a Content's description. Build makes the document from the
// corpus; the few members that come from the server's configuration (the
// token and authorization URLs of the identity provider, the licence
// terms) are filled in when the bytes are first rendered, once per
// Content, and those bytes are then served as is.
type Doc struct {
	version string
	doc     oaObj // without the configured members
	bytes   atomic.Pointer[Rendered]
}

// Rendered is the rendered document and its ETag, for one
// configuration.
type Rendered struct {
	conf Conf
	Body []byte
	Tag  string // hashed from Body (spec: Conditional requests §1)
}

// Conf are the members of the description that come from the
// server's configuration.
type Conf struct {
	Issuer     string // the first authorization server
	LicenseURL string
}

// Render returns the document's bytes for conf, rendering them on first
// use.
func (d *Doc) Render(conf Conf) (*Rendered, error) {
	if b := d.bytes.Load(); b != nil && b.conf == conf {
		return b, nil
	}
	doc := maps.Clone(d.doc)
	info := maps.Clone(d.doc["info"].(oaObj))
	lic := oaObj{"name": "Licensed use only; redistribution outside the licensed organization is not permitted"}
	if conf.LicenseURL != "" {
		lic["url"] = conf.LicenseURL
	}
	info["license"] = lic
	doc["info"] = info
	comps := maps.Clone(d.doc["components"].(oaObj))
	comps["securitySchemes"] = oaSecuritySchemes(conf.Issuer)
	doc["components"] = comps
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	body := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	b := &Rendered{conf: conf, Body: body, Tag: etag.FromBytes(body)}
	d.bytes.Store(b)
	return b, nil
}

// Build generates the description of every route in the table, and of
// the download links, for corpus c.
func Build(c *corpus.Corpus) *Doc {
	e := oaEnumsOf(c)
	paths := oaObj{}
	for _, rt := range route.All() {
		p, ok := paths[rt.Pattern].(oaObj)
		if !ok {
			p = oaObj{}
			paths[rt.Pattern] = p
		}
		p[strings.ToLower(rt.Method)] = oaOperation(&rt, e)
	}
	oaDownloads(paths, e)
	doc := oaObj{
		"openapi": "3.1.0",
		"info": oaObj{
			"title":   "Lectern Curriculum Content API",
			"version": Version,
			"summary": "Authenticated, metered REST/JSON access to a licensed curriculum corpus.",
			"description": "Licensed organizations read tiers, subjects, classes (lessons), transcripts, quizzes, media, " +
				"exports, original test-prep items and learner progress. Every content response carries contentVersion " +
				"and the licence envelope _license; every error has the Error body, and clients branch on error.code. " +
				"Usage is metered per organization: see x-service-cost on each operation. This document is generated " +
				"from the route table and the deployed corpus (contentVersion in info.x-content-version).",
			"x-content-version": c.ContentVersion,
		},
		"servers": []any{oaObj{"url": "/", "description": "The host that serves this document."}},
		"tags":    oaTags(),
		"paths":   paths,
		"components": oaObj{
			"schemas": oaSchemas(e),
			"headers": oaHeaders(),
		},
	}
	return &Doc{version: c.ContentVersion, doc: doc}
}

// oaTag groups the operations for documentation.
func oaTag(id route.ID) string {
	switch id {
	case route.OpenAPI:
		return "Description"
	case route.MediaURLs:
		return "Media"
	case route.ExportSubject, route.ExportClass:
		return "Exports"
	case route.Testprep, route.TestprepItems:
		return "Test prep"
	case route.License:
		return "Licence"
	case route.Progress, route.PutProgress:
		return "Progress"
	case route.Changes:
		return "Changes"
	}
	return "Content"
}

func oaTags() []any {
	return []any{
		oaObj{"name": "Description", "description": "This machine-readable description."},
		oaObj{"name": "Content", "description": "Tiers, subjects, classes, lessons, transcripts, quizzes, media inventories and search."},
		oaObj{"name": "Media", "description": "Signed media URLs, minted in batches."},
		oaObj{"name": "Exports", "description": "Whole-subject and whole-class bundles: the supported bulk path."},
		oaObj{"name": "Test prep", "description": "Original practice items for four tests."},
		oaObj{"name": "Licence", "description": "Licence, quota and corpus-version status."},
		oaObj{"name": "Progress", "description": "The signed-in learner's progress."},
		oaObj{"name": "Changes", "description": "Extensions beyond the specification (x-lectern-extension): the change feed, what changed since a contentVersion."},
		oaObj{"name": "Downloads", "description": "The signed links a mint or a zip_url export answers with, under " + link.Prefix + ": no token, unmetered, valid until they expire."},
	}
}
