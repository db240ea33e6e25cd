// The security schemes: the OAuth 2.0 flows of machine clients and of
// learners, whose URLs come from the configured issuer when the document
// is rendered.

package openapi

import "github.com/lectern-api/lectern/shared/scope"

// Security scheme names.
const (
	oaSchemeClient  = "oauth2"  // client_credentials tokens (machine clients)
	oaSchemeLearner = "learner" // authorization_code tokens that carry a learner
)

func oaSecuritySchemes(issuer string) oaObj {
	scopes := oaObj{}
	desc := map[string]string{
		scope.ContentRead:   "Read tiers, subjects, lessons, search, the test-prep catalog and the licence status.",
		scope.ContentExport: "Export whole subjects and classes (spends the monthly export and download quota).",
		scope.MediaDownload: "Mint signed media URLs (spends the monthly download quota).",
		scope.TestprepRead:  "Read practice items (spends the monthly test-prep item allowance).",
		scope.ProgressRead:  "Read the signed-in learner's progress.",
		scope.ProgressWrite: "Record the signed-in learner's progress.",
	}
	for _, sc := range scope.All {
		scopes[scope.Full(sc)] = desc[sc]
	}
	learnerScopes := oaObj{
		scope.Full(scope.ProgressRead):  desc[scope.ProgressRead],
		scope.Full(scope.ProgressWrite): desc[scope.ProgressWrite],
	}
	return oaObj{
		oaSchemeClient: oaObj{
			"type": "oauth2",
			"description": "OAuth 2.0 client_credentials: POST the token endpoint with the client id and secret as HTTP Basic and " +
				"the form fields grant_type=client_credentials and scope, then send Authorization: Bearer <access_token>. " +
				"Tokens live 900 s; cache them and refresh on 401.",
			"flows": oaObj{"clientCredentials": oaObj{"tokenUrl": issuer + "/oauth2/token", "scopes": scopes}},
		},
		oaSchemeLearner: oaObj{
			"type":        "oauth2",
			"description": "An interactive learner token (authorization_code grant with PKCE S256) that carries the learner.",
			"flows": oaObj{"authorizationCode": oaObj{
				"authorizationUrl": issuer + "/oauth2/authorize",
				"tokenUrl":         issuer + "/oauth2/token",
				"scopes":           learnerScopes,
			}},
		},
	}
}
