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
//
// # The module's packages
//
// Every package of the module, one line each, so a reader finds a rule's
// home without opening the tree (doc_test.go holds this list to
// `go list ./...`: a package added or removed fails it until it is listed
// here):
//
//	shared                        this contract; its guard tests keep it TinyGo-safe
//	shared/apierr                 the spec's error codes, their statuses, the one error body
//	shared/cursor                 the sealed, opaque pagination cursor
//	shared/edgesig                the one signature rule of every internal call, both ways, and the replay cache
//	shared/encoding               Accept-Encoding negotiation
//	shared/etag                   ETag derivation and If-None-Match
//	shared/front                  the pipeline front both tiers run: route, authenticate, scope, validate
//	shared/id                     the spec's identifiers: lesson, media, tier, slug
//	shared/jsoncheck              linear-time checks on raw JSON before a parser recurses
//	shared/jsonenc                JSON appended to byte slices without reflection
//	shared/lease                  the wire contract of the edge's licence-and-calls leases
//	shared/link                   signed download links: their keys, signing, parsing, checking
//	shared/ratelimit              the RateLimit-Policy and RateLimit fields, written once for both tiers
//	shared/logbuftest             for tests: a log sink goroutines write while the test reads it
//	shared/ows                    the optional whitespace around HTTP field values (RFC 9110 §5.6.3)
//	shared/param                  strict query and body parsing against the route table
//	shared/reqid                  the request id rule: which incoming X-Request-Id is kept, how a new one is made
//	shared/route                  the route table and Match(method, path)
//	shared/scope                  the OAuth scopes and a token's scope set
//	shared/subkey                 the keys derived from the deployment secret, one a purpose
//	shared/token                  bearer-token verification, the JWKS cache, the 401/403 answers
//	shared/token/tokentest        for tests: deterministic keys, JWK Sets and signed tokens
//	shared/vectorstest            for tests: reads the testdata vectors of shared/, also run through the module by wasmtest
//	internal/buildcache           the edge module and TinyGo test binaries kept by the hash of their sources, for tests and tools
//	internal/cmdline              the commands' settings (environment variables mirrored by flags), -h and -version
//	internal/deptest              for the shipped commands' guard tests: what they link holds no test kit or build tool
//	internal/httpsig              the edge signature rule on net/http requests: origin, wazero host, tests
//	internal/httpsrv              every listener's limits and net/http's own answers rewritten
//	internal/pgschema             a temporary PostgreSQL schema: for a tool's run, and for a test in LECTERN_TEST_PG's database
//	internal/proctest             for tests: a built command run as a child process, its ready line awaited, killed with SIGKILL
//	internal/telemetry            the access log, the Prometheus metrics, /healthz and /readyz, the traceparent
//	internal/tmpfstest            for tests: a small tmpfs that fills up for real
//	internal/telemetry/telemetrytest for tests: a request's access log line, waited for
//	internal/version              the release (semantic version) and the commit a binary was built from: -version, /healthz
//	origin/admin                  the operator's admin API
//	origin/auth                   bearer authentication at the origin
//	origin/billing                billing policy: what each route meters, its refusals, RateLimit headers
//	origin/bundles                the export bundles built, kept on disk: built once, bounded, evicted LRU
//	origin/changes                the change feed's model: each version's subject and class digests, their difference, since tokens
//	origin/clock                  the origin's time source, with the test clock
//	origin/cmd/origin             the origin command: public API, identity provider, admin API
//	origin/corpus                 the corpus format, its loader and in-memory indexes
//	origin/corpus/corpustest      for tests: the small generated corpus, made once per test binary
//	origin/corpus/follow          the corpus an origin serves: the deployment's record followed, reloads one at a time
//	origin/corpus/gen             the deterministic synthetic corpus generator
//	origin/export                 the export bundles, streamed as a zip or the inline tar.gz in base64
//	origin/forensic               the licence envelope, its tag, the bundles' canaries and leak detection
//	origin/idp                    the development identity provider
//	origin/idp/idptest            signs a learner in at the dev identity provider, for tests and tools
//	origin/internal/filelock      one owner per embedded database (flock)
//	origin/internal/jsonbody      strict JSON bodies for the admin API
//	origin/internal/pgmig         PostgreSQL migrations
//	origin/internal/pgsession     the session settings of every PostgreSQL connection
//	origin/internal/pgretry       a read sent again after its PostgreSQL connection was lost
//	origin/internal/private       owner-only modes for files holding secrets; the secret and admin token kept in var/
//	origin/internal/sqlitemig     SQLite migrations
//	origin/lessondoc              the lesson routes' documents, pre-rendered once per corpus
//	origin/lease                  edge leases: grants, reports, revocation, recall and settling
//	origin/lease/leasetest        a fake edge host's revoke endpoint, for tests
//	origin/licence                the organisation gate and grants
//	origin/meter                  the metering contract and the enumeration alarm
//	origin/meter/internal/batch   what the meter backends share: evaluation, commit, group committer
//	origin/meter/metertest        the conformance suite for meter.Store
//	origin/meter/pgmeter          meter.Store over PostgreSQL
//	origin/meter/sqlitemeter      meter.Store over SQLite
//	origin/openapi                the OpenAPI description, generated from the route table and the corpus
//	origin/openapi/openapitest    walking a decoded description, for the generator's and the route's tests
//	origin/progress               the learner's progress record, its rules (XP, streak) and its store contract
//	origin/progress/progresstest  the conformance suite for progress.Store
//	origin/search                 the search engine: the trigram index over the searched fields
//	origin/search/searchtest      the reference search the engine and the route are held to
//	origin/server                 the public API: the request pipeline and the handlers
//	origin/store                  the persistence contract: organisations, clients, keys, codes
//	origin/store/pgstore          store.Store and progress.Store over PostgreSQL
//	origin/store/sqlitestore      store.Store and progress.Store over SQLite
//	origin/store/storetest        the conformance suite for store.Store
//	origin/webhook               the webhooks: endpoints, the durable outbox, signed delivery with retries, the dial-time address check
//	origin/wiring                 the whole origin assembled from options, for cmd/origin and tools/bench
//	worker/cmd/edge               the edge command: the module under wazero, behind the shared listeners and telemetry
//	worker/pipeline               the edge's request pipeline, sans I/O
//	worker/pipeline/originparity  a test: the edge's local answers byte for byte the origin's
//	worker/wasm                   the edge's WebAssembly module (a WASI reactor)
//	worker/wasmbuild              builds the edge module for tests and tools: the pinned TinyGo, its flags, standard Go, cached
//	worker/wazero                 the wazero host that serves HTTP through the module
//	worker/wazero/wazerotest      for tests: the module built once, a host on a real listener, its subrequests counted
//	wasmtest                      tests driving the built module in wazero against a real origin
//	tools                         no code: the rule that the product never imports a tool
//	tools/adminctl                the operator's admin API client
//	tools/bench                   make bench: throughput as ratios measured in one run
//	tools/corpusgen               the corpus generator's command
//	tools/lectern                 the first-party client: lectern sync mirrors a granted corpus
//	tools/internal/stackbin       builds the stack's commands and module; free loopback addresses
//	tools/lectern/api             the lectern command's typed API client, generated by oapi-codegen
//	tools/lectern/gen             writes tools/lectern/api from the served OpenAPI description
//	tools/lectern/internal/lecterntest  the lectern tests' origin, wired in process
//	tools/meterbench              durable meter increments per second
//	tools/soak                    the soak with faults: every route, 50 organisations, meters checked
//	tools/stack                   make run: origin and edge in the foreground
package shared
