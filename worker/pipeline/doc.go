// Package pipeline is the edge's request pipeline, sans I/O (the
// contract is docs/edge.md). Given a request it
// returns either a final response or a subrequest for the host to perform
// — fetch the JWKS, call the origin's gate, forward to the origin — and
// it is called again with that subrequest's response. State is kept per
// request handle, so one Pipeline serves interleaved requests.
//
// The pipeline runs shared/front (route, authenticate, scope, learner,
// validate) exactly as the origin does, and answers the front's refusals
// itself with the origin's exact error response. A request that passes is
// forwarded, except a conditional GET whose candidate ETag matches: that
// one costs a gate call, and the edge then answers 304 itself; or, when
// its organisation holds a lease (lease.go; configured on), no call at
// all, the lease's usage reported to the origin in the background.
//
// Like shared/, the package is TinyGo-safe: no net/http, encoding/json,
// reflect, goroutines or wall clock. Time arrives in every message. A
// Pipeline is not safe for concurrent use; the reactor is single-threaded.
//
// Two APIs over one state machine: the typed Start/Resume/Control, and
// the JSON codec of docs/edge.md (HandleStart, HandleResume,
// HandleControl, ParseConfig) that the reactor in worker/wasm exports.
package pipeline
