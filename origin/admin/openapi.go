package admin

import (
	_ "embed"
	"net/http"
)

// openAPI is the admin API's OpenAPI 3.1 description, written by hand
// beside the routes it describes: TestOpenAPIMatchesRoutes fails when an
// operation has no route or a route no operation.
//
//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the description's bytes (for tests and tools: the admin
// listener serves them at GET /admin/v1/openapi.json).
func OpenAPI() []byte { return append([]byte(nil), openAPI...) }

// openapi is GET /admin/v1/openapi.json, behind the admin token like
// every call: the admin surface is the operator's alone.
func (a *api) openapi(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(openAPI)
	return err
}
