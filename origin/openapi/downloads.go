// The signed download links under /files/ (shared/link), which no route
// row holds: a path item for minted media URLs and one for zip exports.

package openapi

import (
	"maps"
	"slices"

	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/link"
)

// oaDownloads adds the signed download links (shared/link) to paths: the
// URLs a mint (route 10) and a zip_url export (routes 12 and 13) answer
// with. They are outside /v1 and the route table; they take no token (the
// link is the capability), bill nothing, and answer GET and HEAD (the
// routes' HEAD is 405; a link's is served).
func oaDownloads(paths oaObj, e oaEnums) {
	str := func(desc, pattern string, max int) oaObj {
		s := oaObj{"type": "string", "minLength": 1}
		if pattern != "" {
			s["pattern"] = pattern
		}
		if max > 0 {
			s["maxLength"] = max
		}
		return oaObj{"description": desc, "schema": s}
	}
	q := func(name string, required bool, p oaObj) oaObj {
		p["name"], p["in"], p["required"] = name, "query", required
		return p
	}
	const (
		namePattern = `^[A-Za-z0-9_-][A-Za-z0-9._-]*$`
		intPattern  = `^(0|-?[1-9][0-9]*)$`
	)
	name := str("The download's file name.", namePattern, link.MaxName)
	name["name"], name["in"], name["required"] = "name", "path", true
	common := []any{name,
		q("k", true, str("The id of the URL key that signed the link.", namePattern, link.MaxKeyID)),
		q("x", true, str("The expiry, in unix seconds: the link is valid while the server's clock is before it.", intPattern, 0)),
		q("r", true, str("The ledger row the link was minted as, so that two mints of one target are two links.", intPattern, 0)),
		q("o", true, str("The organisation the link was made for.", "", 0)),
		q("g", true, oaObj{"description": "The generation of that organisation: a link of a deleted organisation stays refused when one of the same id is created again.",
			"schema": oaObj{"type": "string"}}),
	}
	sig := q("s", true, str("The unpadded base64url HMAC-SHA-256, with key k, over every other field of the link.", `^[A-Za-z0-9_-]{43}$`, 0))
	desc := "The URL is used as it was answered: its fields are signed, and a link with any field changed, added or " +
		"removed, past its expiry, or signed with a key the server no longer holds is 404 `NOT_FOUND`, whose message " +
		"says to mint or export again. A link ends with its organisation: at every download the organisation it names is " +
		"read, and a suspended, expired or no longer granted one is refused (403), a deleted one 404. No token; nothing is metered. Other methods than GET and HEAD answer 405 " +
		"`METHOD_NOT_ALLOWED` in the Error body, with `Allow: GET, HEAD`."
	cost := func(note string) oaObj { return oaObj{"meters": []string{}, "note": note} }
	refused := func() oaObj {
		hs := oaHeaderRefs("X-Request-Id", "Cache-Control")
		return oaObj{
			"403": oaError(403, []apierr.Code{apierr.OrgSuspended, apierr.LicenseExpired, apierr.LicenseRequired, apierr.TierNotLicensed, apierr.ContentNotGranted}, hs,
				"The organisation the link was made for may no longer read it: its plan is suspended (by an operator or the enumeration alarm), "+
					"its licence expired or awaits a newer agreement, or its grants no longer cover the subject. Checked at every download."),
			"404": oaError(404, []apierr.Code{apierr.NotFound}, hs, "The link is expired, altered, of an unknown key, names what the server no longer serves, "+
				"or an organisation that no longer exists (deleted, or deleted and created again): mint or export again."),
			"429": oaError(429, []apierr.Code{apierr.RateLimited}, oaHeaderRefs("X-Request-Id", "Cache-Control", "Retry-After"),
				"The organisation has the most downloads in progress served at once (8 per origin), or started more than 50 a second (in bursts of 100): retry after Retry-After seconds."),
			"500": oaError(500, []apierr.Code{apierr.Internal}, oaHeaderRefs("X-Request-Id"), ""),
		}
	}
	op := func(id, summary, note string, params []any, rs oaObj) oaObj {
		o := oaObj{"operationId": id, "summary": summary, "tags": []string{"Downloads"}, "security": []any{},
			"x-service-cost": cost(note), "responses": rs}
		if params != nil {
			o["parameters"] = params
		}
		return o
	}

	// A download: a file's bytes, ranges and revalidation as
	// http.ServeContent answers them, a media asset's or a stored bundle's.
	binary := oaObj{"type": "string", "format": "binary"}
	hdr := func(desc string, required bool, schema oaObj) oaObj {
		return oaObj{"description": desc, "required": required, "schema": schema}
	}
	length := func(desc string) oaObj { return hdr(desc, true, oaObj{"type": "integer", "minimum": 0}) }
	disposition := hdr("attachment, with the link's file name (unique per lesson for an asset, per target for a bundle): a name safe to save as.", true, oaObj{"type": "string"})
	acceptRanges := hdr("Byte ranges are served.", true, oaObj{"type": "string", "const": "bytes"})
	fileResponses := func(head bool, what string, content oaObj, etagH oaObj) oaObj {
		parts := oaObj{"multipart/byteranges": oaObj{"schema": binary}}
		maps.Copy(parts, content)
		with := func(content oaObj, r oaObj) oaObj {
			if !head && len(content) > 0 {
				r["content"] = content
			}
			return r
		}
		base := func(more oaObj) oaObj {
			hs := oaHeaderRefs("X-Request-Id", "Cache-Control")
			maps.Copy(hs, more)
			return hs
		}
		rs := refused()
		rs["200"] = with(content, oaObj{
			"description": what,
			"headers": base(oaObj{"ETag": etagH, "Content-Length": length("The size in bytes."), "Content-Disposition": disposition,
				"Accept-Ranges": acceptRanges}),
		})
		rs["206"] = with(parts, oaObj{
			"description": "Partial content: the requested range (Range, and If-Range naming the current ETag); several ranges come as multipart/byteranges.",
			"headers": base(oaObj{"ETag": etagH, "Content-Length": length("The bytes sent."), "Content-Disposition": disposition,
				"Content-Range": hdr("The range sent, of the whole size; absent from a multipart answer.", false, oaObj{"type": "string", "pattern": `^bytes [0-9]+-[0-9]+/[0-9]+$`}),
				"Accept-Ranges": acceptRanges}),
		})
		rs["304"] = oaObj{
			"description": "Not modified: If-None-Match names the ETag (or is *); empty body.",
			"headers":     base(oaObj{"ETag": etagH, "Content-Disposition": disposition}),
		}
		rs["412"] = oaObj{
			"description": "Precondition failed: If-Match names no current ETag; empty body.",
			"headers":     base(oaObj{"ETag": etagH, "Content-Disposition": disposition}),
		}
		rs["416"] = with(oaObj{"text/plain": oaObj{"schema": oaObj{"type": "string"}}}, oaObj{
			"description": "Range not satisfiable: no range of the request overlaps the file, or the Range header does not parse. " +
				"As Go's http.ServeContent answers it: a plain-text message, not the Error body, without ETag or Cache-Control.",
			"headers": oaObj{"X-Request-Id": oaRef("headers", "X-Request-Id"), "Content-Disposition": disposition,
				"Content-Range": hdr("bytes */<size>, the whole size, when the range parsed but lies past the end.", false, oaObj{"type": "string", "pattern": `^bytes \*/[0-9]+$`})},
		})
		return rs
	}
	fileParams := []any{
		oaObj{"name": "Range", "in": "header", "required": false, "schema": oaObj{"type": "string"},
			"description": "Byte ranges (RFC 9110 §14.2): bytes=<first>-[<last>], bytes=-<suffix>, or several, comma-separated."},
		oaObj{"name": "If-Range", "in": "header", "required": false, "schema": oaObj{"type": "string"},
			"description": "The ETag kept with the bytes already held: the range is sent while it is current, else the whole file."},
		oaIfNoneMatch,
		oaObj{"name": "If-Match", "in": "header", "required": false, "schema": oaObj{"type": "string"},
			"description": "An ETag, several, or *: when none is current the answer is 412."},
	}

	assets := oaObj{}
	for _, m := range e.mimes {
		assets[m] = oaObj{"schema": binary}
	}
	assetTag := hdr("The asset's strong validator: it names one sequence of bytes, so If-Range may use it.", true,
		oaObj{"type": "string", "pattern": `^"[0-9a-f]{16}"$`})
	assetWhat := "The asset, with its MIME type (the media listing's mimeType) and its declared size in bytes."
	mediaNote := "Unmetered: the mint billed the download; repeatable until the link expires while its organisation may read it."
	paths[link.Prefix+"m/{name}"] = oaObj{
		"summary":     "A minted media URL",
		"description": "The `url` of a mint (POST /v1/media/urls). " + desc,
		"parameters":  append(slices.Clone(common), q("m", true, str("The asset's mediaId.", "", 0)), sig),
		"get":         op("downloadMedia", "Download a media asset by its signed URL", mediaNote, fileParams, fileResponses(false, assetWhat, assets, assetTag)),
		"head":        op("headMedia", "The headers of a media download, without its bytes", mediaNote, fileParams, fileResponses(true, assetWhat, assets, assetTag)),
	}

	// An export bundle: a zip built once and kept, or 503 when the
	// server has no disk room to build it (origin/server bundleFailed).
	noRoom := func(rs oaObj) oaObj {
		rs["503"] = oaError(503, []apierr.Code{apierr.Internal}, oaHeaderRefs("X-Request-Id", "Cache-Control", "Retry-After"), oaNoRoom)
		return rs
	}
	zip := oaObj{"application/zip": oaObj{"schema": binary}}
	zipTag := hdr("The bundle's strong validator (a hash of all that makes its bytes), so If-Range may use it to resume.", true,
		oaObj{"type": "string", "pattern": `^"[0-9a-f]{64}"$`})
	zipWhat := "The bundle as a zip (manifest.json, class-<N>.json, class-<N>.transcript.md, media-manifest.json, LICENSE.txt): " +
		"built on its first download and kept, the same bytes on every download of the link, with its size and byte ranges, so a download resumes."
	exportNote := "Unmetered: the export billed its downloads; repeatable until the link expires while its organisation may read it."
	exportParams := append(slices.Clone(common),
		q("sc", true, str("The scope set of the token that exported it, as its scope claim writes it.", "", 0)),
		q("v", true, str("The contentVersion it was exported under; once the corpus moves on, the link is 404.", "", 0)),
		q("t", true, str("The subject's tier.", "", 0)),
		q("sl", true, str("The subject's slug.", "", 0)),
		q("c", false, str("A class export's class number; absent for a whole subject.", `^[1-9][0-9]*$`, 0)),
		sig)
	paths[link.Prefix+"e/{name}"] = oaObj{
		"summary":     "A zip export's URL",
		"description": "The `url` of a format=zip_url export (routes /v1/exports/…), valid 15 minutes. " + desc,
		"parameters":  exportParams,
		"get":         op("downloadExport", "Download an export bundle by its signed URL", exportNote, fileParams, noRoom(fileResponses(false, zipWhat, zip, zipTag))),
		"head":        op("headExport", "The headers and size of an export download, without its bytes", exportNote, fileParams, noRoom(fileResponses(true, zipWhat, zip, zipTag))),
	}
}
