package param

import (
	"strconv"
	"strings"

	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/valyala/fastjson"
)

// MaxBody bounds a request body. It is large enough for 101 media ids of
// the longest legal form, so that an oversized batch is reported as
// BATCH_TOO_LARGE rather than as an oversized body.
const MaxBody = 64 << 10

// MaxMediaIDs is the most ids one mint may carry (spec: Limits).
const MaxMediaIDs = 100

// Expiry bounds of a minted URL, in seconds (spec: Route rules §4).
const (
	MinExpiresIn     = 60
	DefaultExpiresIn = 900
	MaxExpiresIn     = 900
	MaxLongExpiresIn = 3600
)

// Mint is a validated POST /v1/media/urls body. The ids are checked for
// shape later, when the target is resolved (a malformed id is a bad id,
// which bills the call).
type Mint struct {
	MediaIDs  []string
	ExpiresIn int64 // DefaultExpiresIn when absent; not yet clamped to the caller's cap
}

// ParseMint validates a mint body: a JSON object with mediaIds (1 to 100
// strings; more is BATCH_TOO_LARGE) and an optional integer expiresIn of
// at least 60.
func ParseMint(body []byte) (Mint, *apierr.Error) {
	var m Mint
	obj, err := object(body, "mediaIds", "expiresIn")
	if err != nil {
		return m, err
	}
	ids := obj.Get("mediaIds")
	if ids == nil {
		return m, &apierr.Error{Code: apierr.BadRequest, Parameter: "mediaIds",
			Message: "mediaIds is required: an array of 1 to 100 media ids."}
	}
	arr, e := ids.Array()
	if e != nil {
		return m, &apierr.Error{Code: apierr.BadRequest, Parameter: "mediaIds",
			Message: "mediaIds must be an array of strings."}
	}
	if len(arr) > MaxMediaIDs {
		return m, &apierr.Error{Code: apierr.BatchTooLarge, Parameter: "mediaIds",
			Received: strconv.Itoa(len(arr)), ReceivedNumber: true, Max: apierr.Int(MaxMediaIDs),
			Message: strconv.Itoa(len(arr)) + " media ids in one mint; at most 100 are allowed. Split the batch."}
	}
	if len(arr) == 0 {
		return m, &apierr.Error{Code: apierr.BadRequest, Parameter: "mediaIds",
			Received: "0", ReceivedNumber: true, Min: apierr.Int(1), Max: apierr.Int(MaxMediaIDs),
			Message: "mediaIds must hold 1 to 100 media ids."}
	}
	m.MediaIDs = make([]string, len(arr))
	for i, v := range arr {
		b, e := v.StringBytes()
		if e != nil {
			return m, &apierr.Error{Code: apierr.BadRequest, Parameter: "mediaIds",
				Message: "mediaIds[" + strconv.Itoa(i) + "] is not a string."}
		}
		m.MediaIDs[i] = string(b)
	}
	m.ExpiresIn = DefaultExpiresIn
	if v := obj.Get("expiresIn"); v != nil {
		n, ok := jsonInteger(v)
		if !ok || n < MinExpiresIn {
			e := &apierr.Error{Code: apierr.BadRequest, Parameter: "expiresIn", Min: apierr.Int(MinExpiresIn),
				Message: "expiresIn must be an integer number of seconds, at least 60."}
			if raw, ok := jsonNumber(v); ok { // NaN echoed bare would make the body not JSON
				e.Received, e.ReceivedNumber = raw, true
			}
			return m, e
		}
		m.ExpiresIn = n
	}
	return m, nil
}

// Progress is a validated PUT /v1/progress/... body.
type Progress struct {
	Score     float64
	HasScore  bool
	LearnerID string // "" when absent
}

// MaxLearnerID bounds a learner id.
const MaxLearnerID = 128

// ParseProgress validates a progress body: an optional number score from 0
// to 100 and an optional learnerId string. An empty body is an empty object.
func ParseProgress(body []byte) (Progress, *apierr.Error) {
	var p Progress
	if len(strings.TrimSpace(string(body))) == 0 {
		return p, nil
	}
	obj, err := object(body, "score", "learnerId")
	if err != nil {
		return p, err
	}
	if v := obj.Get("score"); v != nil {
		// fastjson reads NaN, nan and inf as numbers (Float64 gives NaN,
		// which passes both bounds): only a number as RFC 8259 writes it
		// is a score, so NaN is the same free 400 as 101.
		f, e := v.Float64()
		if _, ok := jsonNumber(v); !ok || e != nil || f < 0 || f > 100 {
			return p, &apierr.Error{Code: apierr.BadRequest, Parameter: "score", Min: apierr.Int(0), Max: apierr.Int(100),
				Message: "score must be a number from 0 to 100."}
		}
		p.Score, p.HasScore = f, true
	}
	if v := obj.Get("learnerId"); v != nil {
		b, e := v.StringBytes()
		if e != nil || len(b) == 0 || len(b) > MaxLearnerID {
			return p, &apierr.Error{Code: apierr.BadRequest, Parameter: "learnerId",
				Message: "learnerId must be a non-empty string of at most 128 bytes."}
		}
		p.LearnerID = string(b)
	}
	return p, nil
}

// object parses body as a JSON object whose members are all named in
// allowed, each at most once.
func object(body []byte, allowed ...string) (*fastjson.Object, *apierr.Error) {
	if len(body) > MaxBody {
		return nil, &apierr.Error{Code: apierr.BadRequest, Parameter: "body", Max: apierr.Int(MaxBody),
			Message: "The request body is larger than " + strconv.Itoa(MaxBody) + " bytes."}
	}
	var p fastjson.Parser
	v, e := p.ParseBytes(body)
	if e != nil {
		return nil, &apierr.Error{Code: apierr.BadRequest, Parameter: "body",
			Message: "The request body is not valid JSON."}
	}
	obj, e := v.Object()
	if e != nil {
		return nil, &apierr.Error{Code: apierr.BadRequest, Parameter: "body",
			Message: "The request body must be a JSON object."}
	}
	var bad *apierr.Error
	seen := make([]string, 0, len(allowed))
	obj.Visit(func(k []byte, _ *fastjson.Value) {
		if bad != nil {
			return
		}
		key := string(k)
		switch {
		case !member(allowed, key):
			bad = &apierr.Error{Code: apierr.BadRequest, Parameter: clip(key), Allowed: allowed,
				Message: "Unknown member " + strconv.Quote(clip(key)) + " in the request body."}
		case member(seen, key):
			bad = &apierr.Error{Code: apierr.BadRequest, Parameter: key,
				Message: "The member " + strconv.Quote(key) + " appears more than once in the request body."}
		default:
			seen = append(seen, key)
		}
	})
	return obj, bad
}

// jsonInteger returns the value of a JSON number written as an integer
// (no fraction, no exponent). Values beyond int64 saturate: they are above
// every cap and get clamped.
func jsonInteger(v *fastjson.Value) (int64, bool) {
	raw, ok := jsonNumber(v)
	if !ok {
		return 0, false
	}
	digits := strings.TrimPrefix(raw, "-")
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		if raw[0] == '-' {
			return -1 << 63, true
		}
		return 1<<63 - 1, true
	}
	return n, true
}

// jsonNumber returns the text of v when it is a number as RFC 8259 §6
// writes it: fastjson also reads as numbers NaN, inf (any case, signed),
// a leading '+', leading zeros and a bare '.', none of which is JSON.
func jsonNumber(v *fastjson.Value) (string, bool) {
	if v.Type() != fastjson.TypeNumber {
		return "", false
	}
	raw := string(v.MarshalTo(nil))
	return raw, isJSONNumber(raw)
}

// isJSONNumber reports whether s is
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)? (RFC 8259 §6).
func isJSONNumber(s string) bool {
	i := 0
	digits := func() int {
		n := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case digits() == 0:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '-' || s[i] == '+') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(s)
}
