// The components/schemas: the Error body, the envelopes and every
// route's 200 body.

package openapi

import (
	"slices"

	"github.com/lectern-api/lectern/shared/apierr"
)

// oaSchemas are the components/schemas: the error body, the envelopes and
// every route's 200 body. Bodies of routes whose shape this package owns
// or that exist are closed (additionalProperties false); the others
// require the members the spec names and leave the rest open.
func oaSchemas(e oaEnums) oaObj {
	tierEnum := oaObj{"type": "string", "enum": e.tiers}
	errProps := oaObj{
		"code":              oaObj{"type": "string", "enum": oaCodes(), "description": "Branch on this, never on message or status alone."},
		"message":           oaString,
		"requestId":         oaObj{"type": "string", "description": "Equals the X-Request-Id header."},
		"parameter":         oaString,
		"allowed":           oaStrings,
		"received":          oaObj{"oneOf": []any{oaObj{"type": "string"}, oaObj{"type": "number"}}, "description": "The value refused: a string, or a number as sent."},
		"min":               oaInt,
		"max":               oaInt,
		"grant":             oaString,
		"tiers":             oaStrings,
		"allow":             oaStrings,
		"scope":             oaObj{"type": "string", "description": "insufficient_scope: the missing scope's full name."},
		"retryAfterSeconds": oaCount,
		"quotaResetsAt":     oaDateTime,
		"hint":              oaString,
		"exportsUsed":       oaCount,
		"exportsLimit":      oaCount,
	}
	quota := oaStrict([]string{"used", "limit"}, oaObj{"used": oaCount, "limit": oaObj{"type": []string{"integer", "null"}}})
	nullInt := oaObj{"type": []string{"integer", "null"}}
	return oaObj{
		"Error": oaObj{
			"type": "object", "additionalProperties": false, "required": []string{"error"},
			"description": "The one error body of every route.",
			"properties": oaObj{"error": oaObj{
				"type": "object", "additionalProperties": false,
				"required":   []string{"code", "message", "requestId"},
				"properties": errProps,
			}},
		},
		"ContentVersion": oaObj{"type": "string", "pattern": `^[0-9]{4}-[0-9]{2}-[0-9]{2}\+[0-9A-Za-z]+$`,
			"description": "The corpus version, <date>+<hash>; it moves only on a corpus rebuild."},
		"ContentDigest": oaObj{"type": "string", "pattern": `^sha256:[0-9a-f]{64}$`,
			"description": "A subject's content digest: sha256: and the lowercase hex SHA-256 of everything an export bundle of the subject is made from " +
				"(the subject's own fields; each class's lesson at full detail with every include section, its transcript and quiz; " +
				"each media asset's id, type, MIME type, bytes, duration and location), and of nothing else: not the contentVersion, the organization, its grants or the caller. " +
				"It is the same at every detail level and on the single subject. After contentVersion moves, every ETag moves; " +
				"compare each subject's contentDigest with the one recorded at its last export, and export again only the subjects whose digest differs."},
		"LicenseEnvelope": oaStrict([]string{"lic", "tag"}, oaObj{"lic": oaString, "tag": oaObj{"type": "string", "description": "Forensic marker of organization and scope."}}),
		"OpenAPIDocument": oaOpen("This document.", []string{"openapi", "info", "paths"}, oaObj{"openapi": oaObj{"type": "string", "const": "3.1.0"}}),

		"TierList": oaList("Tiers the organization holds grants in, in canonical order; an absent tier is not licensed.", "TierRow", true),
		"TierRow":  oaStrict([]string{"tier", "label", "count"}, oaObj{"tier": tierEnum, "label": oaString, "count": oaObj{"type": "integer", "minimum": 0, "description": "Granted subjects in the tier."}}),
		"Subject": oaStrict([]string{"slug", "tier", "name", "description", "classCount", "mediaCoverage", "difficulty", "tags", "prerequisites", "related", "classesUrl", "contentDigest", "contentVersion", "_license"}, oaObj{
			"slug": oaString, "tier": tierEnum, "name": oaString, "description": oaString, "classCount": oaCount,
			"mediaCoverage": oaRef("schemas", "MediaCoverage"),
			"difficulty":    oaRef("schemas", "Difficulty"),
			"tags":          oaStrings, "prerequisites": oaStrings, "related": oaStrings,
			"classesUrl":     oaString,
			"contentDigest":  oaRef("schemas", "ContentDigest"),
			"contentVersion": oaRef("schemas", "ContentVersion"), "_license": oaRef("schemas", "LicenseEnvelope"),
		}),
		"SubjectList": oaList("Page of granted subjects, ordered tier then name.", "SubjectRow", false),
		"SubjectRow": oaShaped("A subject row; detail=full fills tags, prerequisites and related subjects, which are null below it.", oaObj{
			"slug": oaString, "tier": tierEnum, "name": oaString, "description": oaString, "classCount": oaCount,
			"mediaCoverage": oaRef("schemas", "MediaCoverage"),
			"difficulty":    oaRef("schemas", "Difficulty"),
			"tags":          oaNullStrings, "prerequisites": oaNullStrings, "related": oaNullStrings,
			"classesUrl":    oaString,
			"contentDigest": oaRef("schemas", "ContentDigest"),
		}),
		"ClassList": oaList("Page of class entries, in class order.", "ClassEntry", false),
		"ClassEntry": oaShaped("A class entry with a ready-made lessonId and availability flags.", oaObj{
			"lessonId": oaString, "classNum": oaClassNum, "title": oaString, "subtitle": oaString,
			"hasVideo": oaBool, "hasNarration": oaBool, "hasTranscript": oaBool,
			"mediaCount": oaCount, "estimatedMinutes": oaCount,
		}),
		"Lesson": oaWith(oaShaped("A class as structured JSON. detail changes how much, never which members exist; include adds the optional sections.", oaObj{
			"lessonId": oaString, "tier": tierEnum, "subjectSlug": oaString, "classNum": oaClassNum,
			"title": oaString, "subtitle": oaString, "hasVideo": oaBool, "hasNarration": oaBool, "hasTranscript": oaBool,
			"estimatedMinutes": oaCount,
			"keyTerms":         oaArray(oaShaped("", oaObj{"term": oaString, "definition": oaString, "cardId": oaString})),
			"cards": oaArray(oaShaped("", oaObj{"id": oaString, "label": oaString, "hasVideo": oaBool, "hasNarration": oaBool,
				"hasImage": oaBool, "body": oaString, "keyPoints": oaStrings, "illustrationAlt": oaString})),
			"truncated":      oaObj{"type": "boolean", "description": "True when any long text was cut at the level's cap."},
			"contentVersion": oaRef("schemas", "ContentVersion"), "_license": oaRef("schemas", "LicenseEnvelope"),
		}), oaObj{
			"quiz":            oaArray(oaRef("schemas", "QuizQuestion")),
			"inlineChecks":    oaArray(oaRef("schemas", "InlineCheck")),
			"interactives":    oaArray(oaShaped("", oaObj{"id": oaString, "cardId": oaString, "kind": oaString, "prompt": oaString, "config": oaObj{"type": "object"}})),
			"narrationText":   oaArray(oaShaped("", oaObj{"cardId": oaString, "text": oaString})),
			"videoTranscript": oaArray(oaShaped("", oaObj{"cardId": oaString, "text": oaString})),
			"media":           oaArray(oaRef("schemas", "MediaAsset")),
			"workedExample": oaObj{"oneOf": []any{oaObj{"type": "null"},
				oaShaped("", oaObj{"problem": oaString, "steps": oaStrings, "answer": oaString})}},
		}),
		"Transcript": oaWith(oaShaped("The spoken text of a class, per card in items; cards with neither narration nor video voiceover are left out.", oaObj{
			"lessonId": oaString, "title": oaString,
			"items": oaArray(oaShaped("", oaObj{"cardId": oaString, "label": oaString,
				"narration": oaNullString, "videoVoiceover": oaNullString})),
			"contentVersion": oaRef("schemas", "ContentVersion"), "_license": oaRef("schemas", "LicenseEnvelope"),
		}), oaObj{"markdown": oaObj{"type": "string", "description": "include=markdown: the same words as one joined string."}}),
		"Quiz": oaShaped("The end-of-class quiz in items and the inline checks, with answer keys.", oaObj{
			"lessonId": oaString, "title": oaString,
			"items": oaArray(oaRef("schemas", "QuizQuestion")), "inlineChecks": oaArray(oaRef("schemas", "InlineCheck")),
			"contentVersion": oaRef("schemas", "ContentVersion"), "_license": oaRef("schemas", "LicenseEnvelope"),
		}),
		"QuizQuestion": oaShaped("", oaObj{"question": oaString, "options": oaStrings, "answerIndex": oaCount}),
		"InlineCheck": oaShaped("A mid-lesson check with graduated hints.", oaObj{"afterCard": oaString, "question": oaString,
			"options": oaStrings, "answerIndex": oaCount, "hints": oaStrings, "rationale": oaString}),
		"MediaList": oaList("Page of the class's media assets; nothing is minted.", "MediaAsset", false),
		"MediaAsset": oaShaped("A media asset; url is always null in a listing.", oaObj{
			"mediaId": oaString, "type": oaObj{"type": "string", "enum": []string{"video", "audio", "image"}},
			"cardId": oaString, "mimeType": oaString, "bytes": oaCount, "durationSeconds": oaObj{"type": []string{"integer", "null"}, "minimum": 0},
			"url": oaObj{"type": "null"},
		}),
		"SearchResults": oaList("Page of hits, filtered to grants before pagination.", "SearchHit", false),
		"SearchHit": oaShaped("A hit with a ready-to-use lessonId and the field that matched.", oaObj{
			"lessonId": oaString, "tier": tierEnum, "subject": oaString, "classNum": oaClassNum, "title": oaString,
			"matchedField": oaObj{"type": "string", "enum": []string{"title", "subtitle", "cardLabel", "keyPoint", "quizQuestion"}},
			"cardId":       oaNullString, "snippet": oaString,
		}),
		"MediaCoverage": oaStrict([]string{"video", "narration", "transcript", "media"}, oaObj{"video": oaCount, "narration": oaCount, "transcript": oaCount, "media": oaCount}),
		"Difficulty":    oaObj{"type": "string", "enum": []string{"beginner", "intermediate", "advanced"}},
		"MintResult": oaStrict([]string{"items", "expiresIn", "contentVersion", "_license"}, oaObj{
			"items": oaObj{"type": "array", "minItems": 1, "maxItems": 100, "description": "One per requested id, in request order; duplicates each get their own URL.",
				"items": oaStrict([]string{"mediaId", "url", "expiresAt"}, oaObj{
					"mediaId":   oaString,
					"url":       oaObj{"type": "string", "format": "uri", "description": "Signed, absolute, under /files/; no token needed until expiresAt."},
					"expiresAt": oaDateTime})},
			"expiresIn":      oaObj{"type": "integer", "minimum": 60, "maximum": 3600, "description": "Seconds each URL lives, as applied (the request's value clamped to the caller's cap)."},
			"contentVersion": oaRef("schemas", "ContentVersion"),
			"_license":       oaRef("schemas", "LicenseEnvelope"),
		}),
		"ExportResult": oaObj{
			"description": "format=zip_url: url, a signed link to the zip valid 15 minutes, and its expiresAt. format=inline: data, the bundle's tar gzip-compressed then base64-encoded, as encoding and archive say. classes is the number of classes in the bundle (the downloads billed).",
			"oneOf": []any{
				oaStrict([]string{"format", "url", "expiresAt", "classes", "contentVersion", "_license"}, oaObj{
					"format": oaObj{"type": "string", "enum": []string{"zip_url"}}, "url": oaObj{"type": "string", "format": "uri"},
					"expiresAt": oaDateTime, "classes": oaCount,
					"contentVersion": oaRef("schemas", "ContentVersion"), "_license": oaRef("schemas", "LicenseEnvelope")}),
				oaStrict([]string{"format", "encoding", "archive", "data", "classes", "contentVersion", "_license"}, oaObj{
					"format": oaObj{"type": "string", "enum": []string{"inline"}}, "encoding": oaObj{"type": "string", "enum": []string{"gzip+base64"}},
					"archive": oaObj{"type": "string", "enum": []string{"tar"}}, "data": oaObj{"type": "string", "contentEncoding": "base64"},
					"classes": oaCount, "contentVersion": oaRef("schemas", "ContentVersion"), "_license": oaRef("schemas", "LicenseEnvelope")}),
			},
		},
		"TestprepCatalog": oaList("The tests, each with its sections in the spec's order and per-section item counts.", "TestprepTest", true),
		"TestprepTest": oaStrict([]string{"id", "name", "itemCount", "itemsUrl", "sections"}, oaObj{
			"id": oaObj{"type": "string", "enum": e.tests}, "name": oaString, "itemCount": oaCount, "itemsUrl": oaString,
			"sections": oaObj{"type": "array", "items": oaStrict([]string{"id", "label", "itemCount", "itemsUrl"}, oaObj{
				"id": oaObj{"type": "string", "enum": e.sections}, "label": oaString, "itemCount": oaCount, "itemsUrl": oaString})},
		}),
		"TestprepItemList": oaList("Page of practice items; shorter than limit when the monthly item allowance runs low.", "TestprepItem", true),
		"TestprepItem": oaStrict([]string{"id", "section", "domain", "difficulty", "prompt", "options", "answerIndex", "rationale"}, oaObj{
			"id": oaString, "section": oaObj{"type": "string", "enum": e.sections}, "domain": oaString,
			"difficulty": oaObj{"type": "string", "enum": []string{"easy", "medium", "hard"}},
			"passage":    oaObj{"type": "string", "description": "Reading items only."},
			"prompt":     oaString, "options": oaObj{"type": "array", "minItems": 2, "items": oaString},
			"answerIndex":      oaObj{"type": "integer", "minimum": 0, "description": "Zero-based index into options."},
			"rationale":        oaString,
			"optionRationales": oaObj{"type": "array", "items": oaString, "description": "When present, one per option."},
		}),
		"ChangeList": oaWith(oaList("An extension (x-lectern-extension): page of the granted lessons added, changed or removed "+
			"between since and contentVersion, each subject's lessons in class order; every granted lesson of a subject added "+
			"(newly granted, or new to the corpus) or removed (no longer granted, or gone) is listed too.", "LessonChange", false), oaObj{
			"from":     oaRef("schemas", "ContentVersion"),
			"to":       oaRef("schemas", "ContentVersion"),
			"subjects": oaObj{"type": "array", "items": oaRef("schemas", "SubjectChange"), "description": "The subjects added, changed or removed: on the first page; empty on the others."},
			"next":     oaObj{"type": "string", "description": "The since to poll with once every page is read: it names contentVersion and the grants held now, so that a grant's change is answered as additions and removals."},
		}),
		"LessonChange": oaShaped("A lesson that changed.", oaObj{
			"lessonId": oaString, "subject": oaString,
			"change":        oaObj{"type": "string", "enum": []string{"added", "changed", "removed"}},
			"contentDigest": oaObj{"oneOf": []any{oaRef("schemas", "ContentDigest"), oaObj{"type": "null"}}, "description": "The subject's contentDigest at contentVersion; null when the subject was removed."},
		}),
		"SubjectChange": oaShaped("A subject that changed.", oaObj{
			"subject":              oaString,
			"change":               oaObj{"type": "string", "enum": []string{"added", "changed", "removed"}},
			"contentDigest":        oaObj{"oneOf": []any{oaRef("schemas", "ContentDigest"), oaObj{"type": "null"}}, "description": "Its contentDigest at contentVersion; null when removed."},
			"classCount":           oaCount,
			"subjectFieldsChanged": oaObj{"type": "boolean", "description": "Its own fields changed (name, description, tags, difficulty, prerequisites, related): a class export does not carry them; export the subject."},
		}),
		"LicenseStatus": oaStrict([]string{"orgId", "orgName", "tier", "status", "contentGrants", "quota", "rateLimits", "resetsAt", "eclaVersion", "requiredEclaVersion", "renewsAt", "contentVersion", "licenseUrl"}, oaObj{
			"orgId": oaString, "orgName": oaString, "tier": oaString, "status": oaString,
			"contentGrants": oaObj{"type": "array", "items": oaString, "description": "<tier> or <tier>/<subjectSlug>."},
			"quota": oaStrict([]string{"calls", "downloads", "exports", "testprepitems"}, oaObj{
				"calls": quota, "downloads": quota, "exports": quota, "testprepitems": quota}),
			"rateLimits": oaStrict([]string{"callsPerHour", "lessonReadsPerHour", "urlMintsPerHour"}, oaObj{
				"callsPerHour": nullInt, "lessonReadsPerHour": nullInt, "urlMintsPerHour": nullInt}),
			"resetsAt":    oaDateTime,
			"eclaVersion": oaInt, "requiredEclaVersion": oaInt,
			"renewsAt":       oaDateTime,
			"contentVersion": oaRef("schemas", "ContentVersion"),
			"licenseUrl":     oaString,
		}),
		"Progress":      oaProgress(),
		"ProgressClass": oaProgressClass(tierEnum),
		"Streak": oaStrict([]string{"current", "longest", "lastDay"}, oaObj{
			"current": oaObj{"type": "integer", "minimum": 0, "description": "Consecutive UTC days with a saved write, ending today or yesterday; otherwise 0."},
			"longest": oaObj{"type": "integer", "minimum": 0, "description": "The longest such run ever."},
			"lastDay": oaObj{"type": []string{"string", "null"}, "format": "date", "description": "The UTC day of the last saved write; null when none."},
		}),
		"ProgressAck": oaWithDesc("The class as recorded, with the learner's XP and streak; under 384 bytes, never compressed.",
			oaStrict([]string{"lessonId", "score", "bestScore", "xp", "streak"}, oaObj{
				"lessonId": oaString, "score": oaScore("The score this write sent; null when it sent none."),
				"bestScore": oaScore("The highest score ever sent for the class; null when none was."),
				"xp":        oaXP, "streak": oaRef("schemas", "Streak"),
			})),
	}
}

func oaCodes() []string {
	cs := append(apierr.Codes(), apierr.Extensions()...)
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = string(c)
	}
	return out
}

// oaXP is the learner's XP: over every recorded class, granted now or
// not, 10 plus a tenth of its best score rounded down.
var oaXP = oaObj{"type": "integer", "minimum": 0, "description": "Sum over every recorded class (granted now or not) of 10 + floor(bestScore / 10); 10 for a class without a score."}

// oaScore is a progress score, null when none.
func oaScore(desc string) oaObj {
	return oaObj{"type": []string{"number", "null"}, "minimum": 0, "maximum": 100, "description": desc}
}

// oaProgress is GET /v1/progress's body: the list envelope of the
// recorded classes of subjects granted now, with the learner's id, XP and
// streak.
func oaProgress() oaObj {
	o := oaList("The signed-in learner's recorded classes of subjects granted now, ordered by tier (canonical order), subjectSlug and classNum; a class absent from items is not started. "+
		"A saved write during a walk may shift the pages after it.", "ProgressClass", true)
	props := o["properties"].(oaObj)
	props["learnerId"] = oaObj{"type": "string", "description": "The token's learner."}
	props["xp"] = oaXP
	props["streak"] = oaRef("schemas", "Streak")
	o["required"] = append(slices.Clone(oaListKeys), "learnerId", "xp", "streak")
	return o
}

// oaProgressClass is one recorded class.
func oaProgressClass(tierEnum oaObj) oaObj {
	return oaStrict([]string{"lessonId", "tier", "subjectSlug", "classNum", "score", "bestScore", "firstRecordedAt", "lastRecordedAt"}, oaObj{
		"lessonId": oaString, "tier": tierEnum, "subjectSlug": oaString, "classNum": oaClassNum,
		"score":           oaScore("The latest write's score; null when that write sent none."),
		"bestScore":       oaScore("The highest score ever sent; null when none was."),
		"firstRecordedAt": oaDateTime, "lastRecordedAt": oaDateTime,
	})
}
