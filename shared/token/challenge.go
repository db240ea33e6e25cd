package token

import (
	"strings"

	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/scope"
)

// The reasons BearerToken gives, in the vocabulary of Failure.Reason.
const (
	ReasonNoHeader  = "authorization header missing"
	ReasonNotBearer = "authorization scheme is not Bearer"
	ReasonNoToken   = "malformed bearer credentials"
)

// BearerToken extracts the token of an Authorization header value (RFC
// 6750 §2.1):
//
//	credentials = "Bearer" 1*SP b64token
//	b64token    = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="
//
// The scheme is case-insensitive (RFC 9110 §11.1) and surrounding
// whitespace is ignored (RFC 9110 §5.5). Anything else, a second token or
// a parameter included, is refused with one of the Reason constants above.
func BearerToken(authorization string) (token, reason string, ok bool) {
	scheme, rest := splitScheme(authorization)
	if scheme == "" {
		return "", ReasonNoHeader, false
	}
	if !strings.EqualFold(scheme, "Bearer") {
		return "", ReasonNotBearer, false
	}
	token = strings.TrimLeft(rest, " ")
	if !isB64Token(token) {
		return "", ReasonNoToken, false
	}
	return token, "", true
}

// Combined reports whether a Bearer Authorization value holds a comma: a
// b64token never does (RFC 6750 §2.1), so it is two field lines combined
// into one by a recipient (RFC 9110 §5.3), as the Fetch API's Headers do
// (the Cloudflare host sees "Bearer a, Bearer b"). Other schemes are left
// to BearerToken, which refuses them as not Bearer.
func Combined(authorization string) bool {
	scheme, rest := splitScheme(authorization)
	return strings.EqualFold(scheme, "Bearer") && strings.IndexByte(rest, ',') >= 0
}

// splitScheme splits an Authorization value into its scheme and what
// follows the scheme's space; both empty for an empty value.
func splitScheme(authorization string) (scheme, rest string) {
	scheme, rest, _ = strings.Cut(strings.Trim(authorization, " \t"), " ")
	return scheme, rest
}

func isB64Token(s string) bool {
	body := strings.TrimRight(s, "=")
	if body == "" {
		return false
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/') {
			return false
		}
	}
	return true
}

// Unauthorized is the 401 invalid_token error for a token refused for
// reason (a Failure.Reason or a BearerToken reason). Its challenge is
// Challenge(realm, "invalid_token", reason, resourceMetadata).
func Unauthorized(reason string) *apierr.Error {
	return apierr.New(apierr.InvalidToken, unauthorizedPrefix+reason+".")
}

// InsufficientScope is the 403 insufficient_scope error for a token that
// lacks the scope suffix (spec: Authentication §7): its Scope key and its
// message name the full scope, service-api/<suffix>. Its challenge is
// ScopeChallenge.
func InsufficientScope(suffix string) *apierr.Error {
	e := apierr.New(apierr.InsufficientScope, scopeMessage(suffix))
	e.Scope = scope.Full(suffix)
	return e
}

func scopeMessage(suffix string) string {
	return "The token lacks the scope " + scope.Full(suffix) + " that this route requires."
}

// Realm is the realm of the API's Bearer challenges, the same from both
// tiers (RFC 6750 §3).
const Realm = "lectern"

// Challenge is the WWW-Authenticate value of a refused token (RFC 6750 §3
// with RFC 9728 §5.1):
//
//	Bearer realm="...", error="...", error_description="...", resource_metadata="..."
//
// where resourceMetadata is the URL of the API's
// /.well-known/oauth-protected-resource. Empty parameters other than realm
// and error are left out. Values are quoted strings (RFC 9110 §5.6.4): '"'
// and '\' are backslash-escaped, and anything outside printable ASCII
// (control characters, DEL, non-ASCII) is dropped, which also keeps
// error_description within RFC 6750's character set.
func Challenge(realm, errCode, description, resourceMetadata string) string {
	return challenge(realm, errCode, description, "", resourceMetadata)
}

// ScopeChallenge is the WWW-Authenticate value that goes with
// InsufficientScope(suffix): error="insufficient_scope", the same
// description as the body's message, and scope="service-api/<suffix>"
// (RFC 6750 §3).
func ScopeChallenge(realm, suffix, resourceMetadata string) string {
	return challenge(realm, string(apierr.InsufficientScope), scopeMessage(suffix), scope.Full(suffix), resourceMetadata)
}

func challenge(realm, errCode, description, scopes, resourceMetadata string) string {
	b := make([]byte, 0, 64+len(realm)+len(description)+len(scopes)+len(resourceMetadata))
	b = append(b, "Bearer "...)
	b = param(b, "realm", realm)
	b = append(b, ", "...)
	b = param(b, "error", errCode)
	for _, p := range [...]struct{ name, value string }{
		{"error_description", description}, {"scope", scopes}, {"resource_metadata", resourceMetadata},
	} {
		if p.value != "" {
			b = append(b, ", "...)
			b = param(b, p.name, p.value)
		}
	}
	return string(b)
}

func param(b []byte, name, value string) []byte {
	b = append(b, name...)
	b = append(b, '=', '"')
	for i := 0; i < len(value); i++ {
		c := value[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c >= 0x20 && c < 0x7f:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// unauthorizedPrefix is how Unauthorized's message begins; ChallengeFor
// takes the reason back out of it.
const unauthorizedPrefix = "The bearer token was not accepted: "

// ChallengeFor is the WWW-Authenticate value that goes with e: the
// Challenge of an Unauthorized error, the ScopeChallenge of an
// InsufficientScope error, and "" for any other error. Both tiers answer
// with it, so their challenges are identical.
func ChallengeFor(e *apierr.Error, realm, resourceMetadata string) string {
	switch e.Code {
	case apierr.InvalidToken:
		reason := strings.TrimSuffix(strings.TrimPrefix(e.Message, unauthorizedPrefix), ".")
		return Challenge(realm, string(apierr.InvalidToken), reason, resourceMetadata)
	case apierr.InsufficientScope:
		suffix, _ := scope.Suffix(e.Scope)
		return ScopeChallenge(realm, suffix, resourceMetadata)
	case apierr.BadRequest:
		if e.Parameter == "Authorization" {
			return Challenge(realm, "invalid_request", repeatedMessage, resourceMetadata)
		}
	}
	return ""
}

// RepeatedAuthorization is the error for a request with more than one
// Authorization field line: a malformed request, which RFC 6750 §3.1
// answers 400 invalid_request. The spec's invalid_request code is a
// reserved 401 it says is never emitted, so the body is its 400,
// BAD_REQUEST naming the Authorization header, and the challenge carries
// error="invalid_request" (docs/decisions/errors-and-ids.md).
func RepeatedAuthorization() *apierr.Error {
	return &apierr.Error{Code: apierr.BadRequest, Parameter: "Authorization", Message: repeatedMessage}
}

const repeatedMessage = "The request has more than one Authorization header; send exactly one: Authorization: Bearer <token>."
