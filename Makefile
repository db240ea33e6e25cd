# Lectern — the Curriculum Content API. `make` lists the targets.

GO       ?= go
CORPUS   ?= var/corpus
FUZZTIME ?= 30s

# Pinned tool versions. TinyGo is found on PATH or where
# tools/tinygo/build.sh installs it; `make worker` falls back to standard Go.
TINYGO_VERSION   := 0.42.0
WRANGLER_VERSION := 4.86.0
TINYGO ?= $(shell command -v tinygo 2>/dev/null || { t=$$HOME/.cache/lectern/tinygo-$(TINYGO_VERSION)/bin/tinygo; [ -x "$$t" ] && echo "$$t"; })

# Fuzz targets as package:Name; `make fuzz` runs each for FUZZTIME.
FUZZ := ./shared/cursor:FuzzCursor \
	./shared/id:FuzzParseLesson ./shared/id:FuzzParseMedia \
	./shared/encoding:FuzzNegotiate ./shared/etag:FuzzMatch \
	./shared/param:FuzzParse ./shared/param:FuzzMint ./shared/param:FuzzProgress ./shared/param:FuzzJSONNumber \
	./shared/token:FuzzVerify ./shared/token:FuzzSigned ./shared/token:FuzzParseJWKS \
	./shared/token:FuzzBearerToken ./shared/jsonenc:FuzzString \
	./worker/pipeline:FuzzHandle ./worker/pipeline:FuzzScan ./worker/pipeline:FuzzDecode \
	./worker/pipeline:FuzzLeaseMessages ./shared/lease:FuzzMessages \
	./shared/link:FuzzParse ./origin/forensic:FuzzDetect ./origin/progress:FuzzDecode

.DEFAULT_GOAL := help
.PHONY: help run test test-short check bench corpus fuzz

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  make %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

run: worker ## start the stack in the foreground (edge, origin, identity provider, admin API); Ctrl-C stops it
	$(GO) build -o build/ ./origin/cmd/origin ./worker/cmd/edge ./tools/stack
	build/stack -origin build/origin -edge build/edge

# The edge module (docs/edge.md). TinyGo's build is the deployed one
# (docs/edge.md: instantiated in a few ms in workerd); standard Go's is the fallback.
WORKER_PKG   := ./worker/wasm
TINYGO_FLAGS := -target=wasip1 -buildmode=c-shared -scheduler=none -no-debug -opt=2  # worker/wasmbuild.TinyGoFlags says the same (TestMakefileAgrees)
.PHONY: worker worker-go worker-tinygo

worker: build/worker.wasm ## build the edge module (TinyGo when present, else standard Go) into build/worker.wasm, when its sources or compiler changed

# The module's sources: every non-test Go file of the packages it can
# import (a superset of `go list -deps`), and the module's requirements.
WORKER_SRC := $(shell find worker/wasm worker/pipeline shared -name '*.go' ! -name '*_test.go') go.mod go.sum

# build/worker.toolchain names the compiler and flags that build the
# module; it is rewritten only when they change, so that TinyGo appearing
# (or going) rebuilds the module and nothing else does.
WORKER_TOOLCHAIN = $(if $(TINYGO),tinygo $(TINYGO) $(TINYGO_FLAGS),go $(shell $(GO) env GOVERSION) wasip1 c-shared)
build/worker.toolchain: FORCE
	@mkdir -p build
	@echo '$(WORKER_TOOLCHAIN)' | cmp -s - $@ || echo '$(WORKER_TOOLCHAIN)' > $@

build/worker.wasm: $(WORKER_SRC) build/worker.toolchain
	@if [ -n "$(TINYGO)" ]; then \
		echo "worker: TinyGo ($(TINYGO))"; \
		$(TINYGO) build $(TINYGO_FLAGS) -o $@ $(WORKER_PKG); \
	else \
		echo "worker: standard Go (no TinyGo on PATH or in ~/.cache/lectern; tools/tinygo/build.sh installs $(TINYGO_VERSION))"; \
		GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -o $@ $(WORKER_PKG); \
	fi
	@echo "worker: $@, $$(wc -c < $@) bytes"

.PHONY: FORCE
FORCE:

worker-go: ## build/worker-go.wasm with standard Go
	@mkdir -p build
	GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -o build/worker-go.wasm $(WORKER_PKG)

worker-tinygo: ## build/worker-tinygo.wasm with TinyGo (tools/tinygo/build.sh installs it)
	@test -n "$(TINYGO)" || { echo "worker-tinygo: no TinyGo on PATH or in ~/.cache/lectern; run tools/tinygo/build.sh"; exit 1; }
	@mkdir -p build
	$(TINYGO) build $(TINYGO_FLAGS) -o build/worker-tinygo.wasm $(WORKER_PKG)

# Packages whose tests exercise concurrency run again under the race
# detector (it needs cgo; skipped when there is no C compiler).
RACE := ./origin/meter/... ./origin/store/... ./origin/progress/... ./origin/auth/... ./origin/server/... ./origin/lessondoc/... ./origin/search/... ./origin/openapi/... \
	./origin/clock/... ./origin/idp/... ./internal/httpsrv/... ./origin/export/...

# The race pass's PostgreSQL suites, run whole and once (make test).
RACE_WHOLE := ./origin/meter/pgmeter ./origin/store/pgstore

test: ## vet and run every test (suites needing PostgreSQL, Node or TinyGo say when they skip)
	$(GO) vet ./...
	@# The race pass runs beside the main one: many tests wait (on child
	@# processes, timeouts, fsync), and each pass fills the other's waits.
	@# Its output follows the main pass's. The PostgreSQL meter and store
	@# suites (RACE_WHOLE) run once, whole, under the race detector, after
	@# both: beside them their concurrency tests ran out of connections
	@# (max_connections) and time. Any pass failing fails the target.
	@mkdir -p build; rm -f build/race.log; \
	whole=$$($(GO) list $(RACE_WHOLE)); race=0; \
	if command -v gcc >/dev/null 2>&1 || command -v cc >/dev/null 2>&1; then race=1; fi; \
	if [ $$race = 1 ]; then \
		main=$$($(GO) list ./... | grep -vxF "$$whole"); \
		{ $(GO) test -race -short $$($(GO) list $(RACE) | grep -vxF "$$whole") > build/race.log 2>&1; echo $$? > build/race.rc; } & \
	else main=$$($(GO) list ./...); fi; \
	$(GO) test $$main; rc=$$?; wait; \
	if [ $$race = 1 ]; then \
		echo "$(GO) test -race -short $(RACE) (but $(RACE_WHOLE))"; cat build/race.log; \
		[ "$$(cat build/race.rc)" = 0 ] || rc=1; \
		echo "$(GO) test -race $(RACE_WHOLE)"; $(GO) test -race $$whole || rc=1; \
	else echo "race detector skipped: no C compiler (cgo)"; fi; \
	[ $$rc -eq 0 ]

test-short: ## the inner loop (about two minutes): vet, then every test in -short mode on SQLite: no PostgreSQL, wasmtest on the standard Go build's representative tests, no process kills, soak or race pass (make test runs them all)
	$(GO) vet ./...
	LECTERN_TEST_PG= $(GO) test -short ./...

check: test ## test, build the edge module with both toolchains (standard Go, TinyGo), and insist that go.mod is tidy
	GOOS=wasip1 GOARCH=wasm $(GO) build ./shared/...
	@mkdir -p build
	GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -o build/check-go.wasm $(WORKER_PKG)
	@if [ -n "$(TINYGO)" ]; then \
		echo "$(TINYGO) build $(TINYGO_FLAGS) -o build/check-tinygo.wasm $(WORKER_PKG)"; \
		$(TINYGO) build $(TINYGO_FLAGS) -o build/check-tinygo.wasm $(WORKER_PKG); \
	else \
		echo "check: TinyGo build SKIPPED: no TinyGo on PATH or in ~/.cache/lectern (tools/tinygo/build.sh installs $(TINYGO_VERSION)); only standard Go built the module"; \
	fi
	@rm -f build/check-go.wasm build/check-tinygo.wasm
	$(GO) mod tidy -diff

# BENCH_PG names a PostgreSQL database (postgres://…): the rows that touch
# storage run on SQLite, then on a new schema of it, dropped at the end.
# Without it they run on SQLite alone (tools/bench says so in its header).
BENCH_PG ?=
bench_comma := ,

bench: ## benchmarks as ratios measured in one run: content API, edge, leases, tokens, worker CPU, module, memory, meter group commit, the scale curve (tools/bench; flags in BENCHFLAGS, PostgreSQL beside SQLite with BENCH_PG=postgres://…)
	$(GO) run ./tools/bench $(if $(BENCH_PG),-db 'sqlite$(bench_comma)$(BENCH_PG)') $(BENCHFLAGS)

corpus: ## generate the full deterministic corpus into $(CORPUS)
	$(GO) run ./tools/corpusgen -out $(CORPUS)

.PHONY: client
client: ## regenerate the lectern command's API client (tools/lectern/api) from the served OpenAPI description
	$(GO) generate ./tools/lectern/api

fuzz: ## run every fuzz target for FUZZTIME (default 30s)
	@set -e; for t in $(FUZZ); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "fuzz $$pkg $$name ($(FUZZTIME))"; \
		$(GO) test $$pkg -run='^$$' -fuzz="^$$name$$" -fuzztime=$(FUZZTIME); \
	done
