// Package shared is the contract that both tiers compile: the origin server
// and the WebAssembly edge worker. Its packages hold the route table
// (route), parameter rules (param), error codes and the error body
// (apierr), ETags (etag), the cursor codec (cursor), id parsing (id),
// scopes (scope), Accept-Encoding negotiation (encoding) and bearer-token
// verification (token).
//
// Everything under shared/ must build with TinyGo for wasip1 with
// -scheduler=none: no encoding/json, reflect, net/http, database/sql or
// syscall/js, no goroutines, and no time.Now() (time is passed in).
// guard_test.go enforces the rules that can be checked mechanically.
package shared
