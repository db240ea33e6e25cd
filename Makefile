# Lectern — the Curriculum Content API. `make` lists the targets.

GO       ?= go
CORPUS   ?= var/corpus
FUZZTIME ?= 30s

# Fuzz targets as package:Name; `make fuzz` runs each for FUZZTIME.
FUZZ := ./shared/cursor:FuzzCursor \
	./shared/id:FuzzParseLesson ./shared/id:FuzzParseMedia \
	./shared/encoding:FuzzNegotiate ./shared/etag:FuzzMatch \
	./shared/param:FuzzParse ./shared/param:FuzzMint \
	./shared/token:FuzzVerify ./shared/token:FuzzSigned ./shared/token:FuzzParseJWKS \
	./shared/token:FuzzBearerToken ./shared/jsonenc:FuzzString

.DEFAULT_GOAL := help
.PHONY: help run test check bench corpus fuzz

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z]+:.*## / {printf "  make %-8s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

run: ## start the stack in the foreground (origin, identity provider, admin API); Ctrl-C stops it
	$(GO) run ./origin/cmd/origin

# Packages whose tests exercise concurrency run again under the race
# detector (it needs cgo; skipped when there is no C compiler).
RACE := ./origin/meter/... ./origin/store/... ./origin/auth/... ./origin/server/...

test: ## vet and run every test (suites needing PostgreSQL, Node or TinyGo say when they skip)
	$(GO) vet ./...
	$(GO) test ./...
	@if command -v gcc >/dev/null 2>&1 || command -v cc >/dev/null 2>&1; then \
		echo "$(GO) test -race $(RACE)"; $(GO) test -race $(RACE); \
	else echo "race detector skipped: no C compiler (cgo)"; fi

check: test ## test, build shared/ for wasip1, and insist that go.mod is tidy
	GOOS=wasip1 GOARCH=wasm $(GO) build ./shared/...
	$(GO) mod tidy -diff

bench: ## benchmarks, as ratios measured in one run: durable meter increments (group commit vs one txn each)
	$(GO) run ./tools/meterbench

corpus: ## generate the full deterministic corpus into $(CORPUS)
	$(GO) run ./tools/corpusgen -out $(CORPUS)

fuzz: ## run every fuzz target for FUZZTIME (default 30s)
	@set -e; for t in $(FUZZ); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "fuzz $$pkg $$name ($(FUZZTIME))"; \
		$(GO) test $$pkg -run='^$$' -fuzz="^$$name$$" -fuzztime=$(FUZZTIME); \
	done
