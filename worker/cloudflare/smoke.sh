#!/usr/bin/env bash
# Smoke test of the Cloudflare host: the real edge module (build/worker.wasm)
# in workerd under `wrangler dev`, offline, in front of a real origin stack.
#
#   bash worker/cloudflare/smoke.sh
#
# Needs Go, Node 20 + npm and curl. Installs wrangler@4.86.0 into .ci/node
# (gitignored) when absent, builds the module, starts the origin stack and
# wrangler dev on fixed local ports (override with SMOKE_ORIGIN_PORT,
# SMOKE_IDP_PORT, SMOKE_ADMIN_PORT, SMOKE_EDGE_PORT, SMOKE_JWKS_PORT,
# SMOKE_EDGE2_PORT, SMOKE_DEAD_PORT), runs each check
# (PASS/FAIL), prints timings, and exits non-zero when any check fails.
# Everything it starts is stopped on exit. SMOKE_KEEP=1 keeps the temp dir;
# SMOKE_HOLD=1 keeps the stack running after the checks, for poking at.
# SMOKE_MODULE=path.wasm runs that module instead of building
# build/worker.wasm (e.g. the standard Go build, `make worker-go`), from a
# staged copy of the worker, leaving build/ alone.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD

ORIGIN_PORT=${SMOKE_ORIGIN_PORT:-18080}
IDP_PORT=${SMOKE_IDP_PORT:-19090}
ADMIN_PORT=${SMOKE_ADMIN_PORT:-18081}
EDGE_PORT=${SMOKE_EDGE_PORT:-18787}
JWKS_PORT=${SMOKE_JWKS_PORT:-19091}
EDGE2_PORT=${SMOKE_EDGE2_PORT:-18788} # a second edge, in front of a dead origin and the real one
DEAD_PORT=${SMOKE_DEAD_PORT:-18089}   # nothing listens there
ORIGIN=http://127.0.0.1:$ORIGIN_PORT
IDP=http://127.0.0.1:$IDP_PORT
ADMIN=http://127.0.0.1:$ADMIN_PORT
EDGE=http://127.0.0.1:$EDGE_PORT
SECRET=smoke-secret-0123456789abcdef0123456789abcdef
ADMIN_TOKEN=smoke-admin-token
WRANGLER_VERSION=4.86.0
WRANGLER=$ROOT/.ci/node/node_modules/.bin/wrangler

say() { printf '%s\n' "smoke: $*"; }
now_ms() { date +%s%3N; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/lectern-smoke.XXXXXX")
PIDS=()
cleanup() {
	local rc=$?
	for pid in "${PIDS[@]}"; do
		# each child runs in its own process group (setsid): stop the group
		kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
	done
	for pid in "${PIDS[@]}"; do
		for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL -- "-$pid" 2>/dev/null || true
	done
	if [ "${SMOKE_KEEP:-}" = 1 ]; then say "kept $TMP"; else rm -rf "$TMP"; fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for port in "$ORIGIN_PORT" "$IDP_PORT" "$ADMIN_PORT" "$EDGE_PORT" "$JWKS_PORT" "$EDGE2_PORT" "$DEAD_PORT"; do
	if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
		say "port $port is in use; free it or set SMOKE_*_PORT"
		exit 2
	fi
done

# --- wrangler ----------------------------------------------------------------
if [ ! -x "$WRANGLER" ] || [ "$("$WRANGLER" --version 2>/dev/null)" != "$WRANGLER_VERSION" ]; then
	say "installing wrangler@$WRANGLER_VERSION into .ci/node"
	npm install --no-save --no-audit --no-fund --prefix "$ROOT/.ci/node" "wrangler@$WRANGLER_VERSION" >"$TMP/npm.log" 2>&1 ||
		{ cat "$TMP/npm.log"; exit 1; }
fi
say "wrangler $("$WRANGLER" --version)"

# --- the module --------------------------------------------------------------
CONFIG=$ROOT/wrangler.toml
if [ -n "${SMOKE_MODULE:-}" ]; then
	[ -s "$SMOKE_MODULE" ] || { say "SMOKE_MODULE=$SMOKE_MODULE: no such module"; exit 1; }
	mkdir -p "$TMP/stage/worker/cloudflare" "$TMP/stage/build"
	cp worker/cloudflare/worker.mjs "$TMP/stage/worker/cloudflare/"
	cp wrangler.toml "$TMP/stage/"
	cp "$SMOKE_MODULE" "$TMP/stage/build/worker.wasm"
	CONFIG=$TMP/stage/wrangler.toml
	WASM=$SMOKE_MODULE
	say "module: $SMOKE_MODULE, $(wc -c <"$SMOKE_MODULE") bytes (staged)"
else
	if grep -qE '^worker:' Makefile 2>/dev/null; then
		say "make worker"
		make worker
	else
		say "building build/worker.wasm (standard Go)"
		mkdir -p build
		GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o build/worker.wasm ./worker/wasm
	fi
	[ -s build/worker.wasm ] || { say "build/worker.wasm missing after the build"; exit 1; }
	WASM=build/worker.wasm
	say "module: build/worker.wasm, $(wc -c <build/worker.wasm) bytes"
fi

# --- the origin stack --------------------------------------------------------
say "generating the small corpus"
go run ./tools/corpusgen -small -out "$TMP/corpus" >"$TMP/corpusgen.log"
go build -o "$TMP/origin" ./origin/cmd/origin
LECTERN_DB="$TMP/lectern.db" LECTERN_CORPUS="$TMP/corpus" \
	LECTERN_ORIGIN_ADDR="127.0.0.1:$ORIGIN_PORT" LECTERN_IDP_ADDR="127.0.0.1:$IDP_PORT" \
	LECTERN_ADMIN_ADDR="127.0.0.1:$ADMIN_PORT" LECTERN_ADMIN_TOKEN="$ADMIN_TOKEN" \
	LECTERN_SECRET="$SECRET" LECTERN_PUBLIC_URL="$EDGE" \
	setsid "$TMP/origin" >"$TMP/origin.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 300); do
	curl -fs -o /dev/null -H "Authorization: Bearer $ADMIN_TOKEN" "$ADMIN/admin/v1/health" && break
	kill -0 "${PIDS[-1]}" 2>/dev/null || { cat "$TMP/origin.log"; say "origin exited"; exit 1; }
	sleep 0.1
done
curl -fs -o /dev/null -H "Authorization: Bearer $ADMIN_TOKEN" "$ADMIN/admin/v1/health" ||
	{ cat "$TMP/origin.log"; say "origin not ready"; exit 1; }
say "origin ready"

# The edge reads the JWKS through a relay that answers 300 ms late, so that
# requests arriving during the fetch park (docs/edge.md) in every run.
mkdir -p "$TMP/relay"
cat >"$TMP/relay/relay.go" <<'GO'
package main

import (
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"time"
)

func main() {
	target, _ := url.Parse(os.Args[2])
	proxy := httputil.NewSingleHostReverseProxy(target)
	http.ListenAndServe(os.Args[1], http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(300 * time.Millisecond)
		proxy.ServeHTTP(w, r)
	}))
}
GO
(cd "$TMP/relay" && go build -o relay relay.go)
setsid "$TMP/relay/relay" "127.0.0.1:$JWKS_PORT" "$IDP" >"$TMP/relay.log" 2>&1 &
PIDS+=($!)

# --- wrangler dev --------------------------------------------------------------
printf 'LECTERN_SECRET=%s\n' "$SECRET" >"$TMP/dev.vars"
# wrangler_dev PORT ORIGIN_URL NAME: starts wrangler dev on PORT in front of
# ORIGIN_URL, logging to $TMP/NAME.log, and waits until it is ready
# ($ready: when, in ms).
wrangler_dev() {
	# Offline: no metrics, no cf-object fetch, no banner (which would check
	# npm for a newer wrangler).
	WRANGLER_SEND_METRICS=false CLOUDFLARE_CF_FETCH_ENABLED=false WRANGLER_HIDE_BANNER=true CI=1 \
		setsid "$WRANGLER" dev --config "$CONFIG" --ip 127.0.0.1 --port "$1" \
		--env-file "$TMP/dev.vars" --persist-to "$TMP/$3-state" \
		--inspector-port 0 --show-interactive-dev-session=false \
		--var "ORIGIN_URL:$2" --var "JWKS_URL:http://127.0.0.1:$JWKS_PORT/.well-known/jwks.json" \
		--var "ISSUER:$IDP" --var "AUDIENCE:lectern-api" \
		--var "PUBLIC_URL:http://127.0.0.1:$1" \
		</dev/null >"$TMP/$3.log" 2>&1 &
	PIDS+=($!)
	ready=
	for _ in $(seq 1200); do
		if grep -q "Ready on" "$TMP/$3.log"; then ready=$(now_ms); break; fi
		kill -0 "${PIDS[-1]}" 2>/dev/null || break
		sleep 0.05
	done
	[ -n "$ready" ] || { cat "$TMP/$3.log"; say "wrangler dev ($3) did not become ready"; exit 1; }
}
t0=$(now_ms)
wrangler_dev "$EDGE_PORT" "$ORIGIN" wrangler
# The first request instantiates and configures the module.
first=$(curl -s -o /dev/null -w '%{http_code} %{time_total}' "$EDGE/v1/teachers" || true)
served=$(now_ms)
say "wrangler dev ready in $((ready - t0)) ms (first response $((served - t0)) ms after start; first request: ${first#* }s, status ${first%% *})"

# --- checks ------------------------------------------------------------------
FAILS=0
pass() { say "PASS $1"; }
fail() { say "FAIL $1: $2"; FAILS=$((FAILS + 1)); }
# req NAME CURL-ARGS...: response status in $status, headers in $TMP/h, body in $TMP/b
req() {
	status=$(curl -s -m 30 -o "$TMP/b" -D "$TMP/h" -w '%{http_code}' "$@") || status=000
}
header() { tr -d '\r' <"$TMP/h" | grep -i "^$1:" | head -1 | cut -d' ' -f2- || true; }

# Liveness without a token, in workerd as under the Go host.
req "$EDGE/healthz"
if [ "$status" = 200 ] && grep -q '"status":"ok"' "$TMP/b"; then pass "GET /healthz in workerd: 200 {\"status\":\"ok\"}"
else fail "GET /healthz in workerd" "status $status, body $(head -c 200 "$TMP/b")"; fi

req "$EDGE/v1/teachers"
if [ "$status" = 404 ] && grep -q '"code":"NOT_FOUND"' "$TMP/b"; then pass "GET /v1/teachers -> 404 NOT_FOUND"
else fail "GET /v1/teachers" "status $status, body $(head -c 300 "$TMP/b")"; fi

req -I "$EDGE/v1/tiers"
if [ "$status" = 405 ] && [ "$(header Allow)" = GET ]; then pass "HEAD /v1/tiers -> 405 Allow: GET"
else fail "HEAD /v1/tiers" "status $status, Allow '$(header Allow)'"; fi

req "$EDGE/v1/tiers"
www=$(header WWW-Authenticate)
if [ "$status" = 401 ] && [ -n "$www" ] && grep -q '"code":"invalid_token"' "$TMP/b"; then
	pass "GET /v1/tiers without a token -> 401 (WWW-Authenticate: $www)"
	case "$www" in *"resource_metadata=\"$EDGE/.well-known/oauth-protected-resource\""*) ;;
	*) fail "401 challenge" "resource_metadata does not name $EDGE/.well-known/oauth-protected-resource" ;; esac
else fail "GET /v1/tiers without a token" "status $status, WWW-Authenticate '$www', body $(head -c 300 "$TMP/b")"; fi

# An organisation with every tier, a client, and a token from the IdP.
curl -fs -o /dev/null -H "Authorization: Bearer $ADMIN_TOKEN" -H 'Content-Type: application/json' \
	-d '{"orgId":"smoke","orgName":"Smoke","contentGrants":["topics","college","high","middle","primary"]}' \
	"$ADMIN/admin/v1/orgs" || { fail "create org" "admin API refused"; }
client=$(curl -fs -H "Authorization: Bearer $ADMIN_TOKEN" -H 'Content-Type: application/json' \
	-d '{"scopes":["content.read","media.download"]}' "$ADMIN/admin/v1/orgs/smoke/clients" || true)
cid=$(sed -n 's/.*"clientId":"\([^"]*\)".*/\1/p' <<<"$client")
csecret=$(sed -n 's/.*"clientSecret":"\([^"]*\)".*/\1/p' <<<"$client")
TOKEN=$(curl -fs -u "$cid:$csecret" -d grant_type=client_credentials -d 'scope=service-api/content.read service-api/media.download' \
	"$IDP/oauth2/token" | sed -n 's/.*"access_token":"\([^"]*\)".*/\1/p' || true)
if [ -n "$TOKEN" ]; then pass "token from the identity provider (client $cid)"
else fail "token" "no access token (client answer: $client)"; fi
AUTH="Authorization: Bearer $TOKEN"

# The first requests with the token find no keys: one fetches the JWKS and
# the others park until it wakes them (docs/edge.md). The edge answers
# each itself (400 for the unknown parameter) once the token verifies.
burst_args=()
for i in $(seq 12); do burst_args+=(-o /dev/null "$EDGE/v1/tiers?bogus=$i"); done
curl -s -m 60 -Z --parallel-immediate --parallel-max 12 -w '%{http_code}\n' -H "$AUTH" "${burst_args[@]}" >"$TMP/burst" || true
burst=$(sort "$TMP/burst" | uniq -c | tr -s ' ' | sed 's/^ //' | paste -sd, -)
if [ "$burst" = "12 400" ]; then pass "12 concurrent first requests with the token (JWKS fetch, park, wake) -> 400 each"
else fail "concurrent first requests" "statuses (count status): $burst"; fi

req -H "$AUTH" "$EDGE/v1/tiers"
etag=$(header ETag)
if [ "$status" = 200 ] && grep -q '"data"\|"tiers"\|"tier"' "$TMP/b"; then
	pass "GET /v1/tiers with a token -> 200 from the origin (ETag $etag, $(wc -c <"$TMP/b") bytes)"
else fail "GET /v1/tiers with a token" "status $status, Content-Encoding '$(header Content-Encoding)', body $(head -c 300 "$TMP/b" | tr -cd '[:print:]')"; fi
if tr -d '\r' <"$TMP/h" | grep -qi '^x-lectern-'; then fail "internal headers" "X-Lectern-* reached the client"
else pass "no X-Lectern-* header reaches the client"; fi
cp "$TMP/b" "$TMP/edge-tiers"
req -H "$AUTH" "$ORIGIN/v1/tiers"
if [ "$status" = 200 ] && cmp -s "$TMP/b" "$TMP/edge-tiers"; then pass "edge and direct bodies are identical"
else fail "edge/direct parity" "direct status $status, bodies differ"; fi

# edge_signed ID: the origin logged request ID (its X-Request-Id, which
# the edge keeps) as an edge forward whose signature it accepted; a
# refused one is served as a direct request, without "edge". Waits up to
# 10 s for the line.
edge_signed() {
	local line=
	for _ in $(seq 100); do
		line=$(grep -F "\"requestId\":\"$1\"" "$TMP/origin.log" | head -1) && [ -n "$line" ] && break
		sleep 0.1
	done
	case "$line" in *'"edge":"forward"'*) return 0 ;; *) return 1 ;; esac
}

# A forward carries the client's body: the origin's refusal names a member
# only the body holds, the same through the edge as direct. The body is
# read before the module sees the request and the forward's signature
# covers its SHA-256 (the start message's bodySha256), which the origin
# checks against the bytes it received: it takes the POST as the edge's.
body='{"mediaIds":["smoke-media"],"smokeMember":1}'
norm() { sed 's/"requestId":"[^"]*"//' "$TMP/b"; }
req -X POST -H "$AUTH" -H 'Content-Type: application/json' -H 'X-Request-Id: smoke-post-body' --data "$body" "$EDGE/v1/media/urls"
estatus=$status
norm >"$TMP/edge-post"
req -X POST -H "$AUTH" -H 'Content-Type: application/json' --data "$body" "$ORIGIN/v1/media/urls"
norm >"$TMP/direct-post"
if [ "$estatus" = "$status" ] && cmp -s "$TMP/edge-post" "$TMP/direct-post" && grep -q smokeMember "$TMP/edge-post"; then
	pass "POST /v1/media/urls forwards the client's body -> $estatus, as direct"
elif [ "$estatus" = "$status" ] && cmp -s "$TMP/edge-post" "$TMP/direct-post" && grep -q 'does not serve' "$TMP/direct-post"; then
	say "SKIP POST /v1/media/urls body forwarding: the origin does not serve the route yet (edge and direct agree: $status)"
else fail "POST /v1/media/urls" "edge $estatus $(head -c 200 "$TMP/edge-post"); direct $status $(head -c 200 "$TMP/direct-post")"; fi
if edge_signed smoke-post-body; then pass "the POST's signature, over its body's SHA-256, accepted by the origin"
else fail "POST signature" "the origin did not take the POST as the edge's: $(grep -F smoke-post-body "$TMP/origin.log" | head -1; grep 'signature refused' "$TMP/origin.log" | tail -1)"; fi

# A body over the largest any route takes (param.MaxBody, 64 KiB): the
# edge forwards its first 65,537 bytes, signed over them, and the origin
# refuses it as too large, as it does the whole body direct. The rest of
# the body, unread, holds up no later request (worker.mjs, readBody).
head -c 102400 /dev/zero | tr '\0' 'x' >"$TMP/big-body"
req -X POST -H "$AUTH" -H 'Content-Type: application/json' -H 'X-Request-Id: smoke-big-body' --data-binary "@$TMP/big-body" "$EDGE/v1/media/urls"
estatus=$status
norm >"$TMP/edge-big"
after=$(curl -s -m 5 -o /dev/null -w '%{http_code} %{time_total}' "$EDGE/v1/teachers" || true)
if [ "${after%% *}" = 404 ]; then pass "the request after it answered at once (${after#* }s)"
else fail "the request after the 100 KB POST" "status ${after%% *} after ${after#* }s (5 s limit)"; fi
req -X POST -H "$AUTH" -H 'Content-Type: application/json' --data-binary "@$TMP/big-body" "$ORIGIN/v1/media/urls"
norm >"$TMP/direct-big"
if [ "$estatus" = "$status" ] && [ "$status" = 400 ] && cmp -s "$TMP/edge-big" "$TMP/direct-big" && edge_signed smoke-big-body; then
	pass "POST of 100 KB: cut to 65,537 bytes, signed over them, the origin's 400 as direct"
else fail "POST of 100 KB" "edge $estatus $(head -c 200 "$TMP/edge-big"); direct $status $(head -c 200 "$TMP/direct-big"); origin log: $(grep -F smoke-big-body "$TMP/origin.log" | head -1 | cut -c1-300)"; fi

# Content codings: the origin negotiates on the client's Accept-Encoding
# (the host puts back the one Cloudflare replaces), and the encoded body
# passes through byte for byte.
for ae in gzip br identity; do
	req -H "$AUTH" -H "Accept-Encoding: $ae" "$EDGE/v1/tiers"
	ce=$(header Content-Encoding)
	cp "$TMP/b" "$TMP/edge-$ae"
	req -H "$AUTH" -H "Accept-Encoding: $ae" "$ORIGIN/v1/tiers"
	want=$(header Content-Encoding)
	if [ "$ce" = "$want" ] && cmp -s "$TMP/b" "$TMP/edge-$ae"; then
		pass "Accept-Encoding: $ae -> Content-Encoding '${ce:-none}', the same bytes as direct"
	else fail "Accept-Encoding: $ae" "edge Content-Encoding '$ce', direct '$want', bodies $(cmp -s "$TMP/b" "$TMP/edge-$ae" && echo equal || echo differ)"; fi
done

if [ -n "$etag" ]; then
	req -H "$AUTH" -H "If-None-Match: $etag" "$EDGE/v1/tiers"
	if [ "$status" = 304 ] && [ "$(header ETag)" = "$etag" ]; then pass "GET /v1/tiers If-None-Match -> 304"
	else
		gate=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$ORIGIN/internal/gate" || true)
		why=""
		[ "$gate" = 404 ] && why=" (the origin's POST /internal/gate answers 404: not implemented yet)"
		fail "GET /v1/tiers If-None-Match" "status $status, ETag '$(header ETag)'$why, body $(head -c 300 "$TMP/b")"
	fi
else fail "GET /v1/tiers If-None-Match" "no ETag on the 200"; fi

# A leased 304 (docs/edge.md, "Leases"): the gated 304 above asked the
# origin for a lease in the background (ctx.waitUntil); once the origin's
# access log shows it granted, the next revalidation is answered by the
# edge alone. The origin's access log counts its gate calls: a forward
# sent after the 304, once logged, shows no gate call came in between.
gates() { grep -c '"edge":"gate"' "$TMP/origin.log" || true; }
leased=
if [ -n "$etag" ]; then
	cp "$TMP/h" "$TMP/gated-304"
	for _ in $(seq 100); do
		grep '"edge":"lease"' "$TMP/origin.log" | grep -q '"status":200' && { leased=1; break; }
		sleep 0.1
	done
fi
if [ -n "$leased" ]; then
	g0=$(gates)
	req -H "$AUTH" -H "If-None-Match: $etag" "$EDGE/v1/tiers"
	lstatus=$status
	cp "$TMP/h" "$TMP/leased-304"
	req -H "$AUTH" -H "X-Request-Id: smoke-after-leased-304" "$EDGE/v1/tiers" # a forward, logged after the 304
	for _ in $(seq 100); do grep -q smoke-after-leased-304 "$TMP/origin.log" && break; sleep 0.1; done
	g1=$(gates)
	# The same fields as the gated 304's, RateLimit's value and the request id aside.
	fields() { tr -d '\r' <"$1" | sed -n 's/^\([A-Za-z-]*\):.*/\1/p' | tr 'A-Z' 'a-z' | grep -v '^date$' | sort | paste -sd, -; }
	if [ "$lstatus" = 304 ] && [ "$g1" = "$g0" ] && [ "$(fields "$TMP/leased-304")" = "$(fields "$TMP/gated-304")" ]; then
		pass "a second If-None-Match -> 304 from the edge's lease, no gate call (gate calls $g0 -> $g1), the gated 304's fields"
	else
		fail "leased 304" "status $lstatus, gate calls $g0 -> $g1, fields $(fields "$TMP/leased-304") vs gated $(fields "$TMP/gated-304")"
	fi
else fail "leased 304" "the origin granted no lease (its log: $(grep '"edge":"lease"' "$TMP/origin.log" | tail -1))"; fi

# The background JWKS refresh needs a clock past the JWKS max age (1 h),
# which workerd's cannot be moved to: worker.mjs runs under Node instead,
# with the same module (refresh_check.mjs).
if out=$(node worker/cloudflare/refresh_check.mjs worker/cloudflare/worker.mjs "$WASM" 2>&1); then
	pass "background JWKS refresh (worker.mjs under Node, the clock moved): stale set served while the fetch hangs"
else fail "background JWKS refresh" "$(printf '%s\n' "$out" | grep -E 'FAIL|Error' | head -5)"; fi

# Several origins in ORIGIN_URL (docs/edge.md): spreading, failover on a
# dead or resetting origin, what is never sent twice; also under Node, with
# origins it can kill and count (origins_check.mjs).
if out=$(node worker/cloudflare/origins_check.mjs worker/cloudflare/worker.mjs "$WASM" 2>&1); then
	pass "several origins (worker.mjs under Node): $(printf '%s\n' "$out" | grep -c '^PASS') checks of spreading and failover"
else fail "several origins" "$(printf '%s\n' "$out" | grep -E '^FAIL|Error' | head -5)"; fi

# Download links (docs/edge.md): LECTERN_URL_KEYS reaches the module, the
# edge refuses an expired or altered link itself (files_check.mjs).
if out=$(node worker/cloudflare/files_check.mjs worker/cloudflare/worker.mjs "$WASM" 2>&1); then
	pass "download links (worker.mjs under Node): $(printf '%s\n' "$out" | grep -c '^PASS') checks of LECTERN_URL_KEYS and the edge's refusals"
else fail "download links" "$(printf '%s\n' "$out" | grep -E '^FAIL|Error' | head -5)"; fi

# The signature's host and body (docs/edge.md, "Module ABI", "Several
# origins"): bodySha256 in start, the body forwarded cut to 65,537 bytes
# with its Content-Length, "origins" in configure, and each origin's own
# entry of "signatures" on every attempt, for forwards, gate and
# background calls; with a scripted module, then the real one behind
# origins that verify each signature (signatures_check.mjs).
if out=$(node worker/cloudflare/signatures_check.mjs worker/cloudflare/worker.mjs "$WASM" 2>&1); then
	pass "signatures per origin and the body's hash (worker.mjs under Node): $(printf '%s\n' "$out" | grep -c '^PASS') checks"
else fail "signatures per origin and the body's hash" "$(printf '%s\n' "$out" | grep -E '^FAIL|Error' | head -5)"; fi

# The LEASES var: on, off or unset configure the module, anything else is
# refused (leases_check.mjs).
if out=$(node worker/cloudflare/leases_check.mjs worker/cloudflare/worker.mjs "$WASM" 2>&1); then
	pass "LEASES (worker.mjs under Node): $(printf '%s\n' "$out" | grep -c '^PASS') checks of its values"
else fail "LEASES" "$(printf '%s\n' "$out" | grep -E '^FAIL|Error' | head -5)"; fi

# The messages worker.mjs sends and reads, and its own answers' request
# ids, against shared/testdata/edge-messages.txt (messages_check.mjs; also
# run by worker/wazero's TestMessagesSchema).
if out=$(node worker/cloudflare/messages_check.mjs worker/cloudflare/worker.mjs "$WASM" 2>&1); then
	pass "the ABI's messages (worker.mjs under Node): $(printf '%s\n' "$out" | grep -c '^PASS') checks against edge-messages.txt"
else fail "the ABI's messages" "$(printf '%s\n' "$out" | grep -E '^FAIL|Error' | head -5)"; fi

# /healthz (GET and HEAD 200 without a token, as the Go host's) and a
# worker without LECTERN_SECRET (wrangler dev with no .dev.vars): 500 to the
# client, a log line naming the secret and where to put it (health_check.mjs).
if out=$(node worker/cloudflare/health_check.mjs worker/cloudflare/worker.mjs "$WASM" 2>&1); then
	pass "/healthz and a missing secret (worker.mjs under Node): $(printf '%s\n' "$out" | grep -c '^PASS') checks"
else fail "/healthz and a missing secret" "$(printf '%s\n' "$out" | grep -E '^FAIL|Error' | head -5)"; fi

# Several origins in workerd: a second edge in front of a dead origin and
# the real one (docs/edge.md, "Several origins"). Every GET is answered by
# the real origin, one of the first two after trying the dead one (round
# robin); origins_check.mjs counts the backoff. The real origin checks
# that the signature names its own host: the one the worker sends it is
# its entry of the module's signatures, the failover attempt's included.
wrangler_dev "$EDGE2_PORT" "http://127.0.0.1:$DEAD_PORT,$ORIGIN/" wrangler2
EDGE2=http://127.0.0.1:$EDGE2_PORT
codes=$(for i in $(seq 10); do curl -s -m 30 -o /dev/null -w '%{http_code} ' -H "$AUTH" -H "X-Request-Id: smoke-edge2-$i" "$EDGE2/v1/tiers"; done)
# wrangler writes the worker's log lines as they come, but not at once:
# wait up to 10 s for the failover's.
tried=0
for _ in $(seq 100); do
	tried=$(grep -c "trying the next origin" "$TMP/wrangler2.log" || true)
	[ "$tried" -ge 1 ] && break
	sleep 0.1
done
if [ "$codes" = "$(printf '200 %.0s' $(seq 10))" ] && [ "$tried" -ge 1 ]; then
	pass "ORIGIN_URL listing a dead origin: 10 GETs -> 200 through the live one ($tried failed over)"
else fail "ORIGIN_URL with a dead origin" "statuses $codes; the dead origin tried $tried time(s)"; fi
unsigned=
for i in $(seq 10); do edge_signed "smoke-edge2-$i" || unsigned="$unsigned $i"; done
if [ -z "$unsigned" ]; then pass "ORIGIN_URL with a dead origin: each GET's signature, the live origin's entry of the module's signatures, accepted by it"
else fail "ORIGIN_URL with a dead origin" "the origin refused the signature of GET(s)$unsigned: $(grep 'signature refused' "$TMP/origin.log" | tail -1)"; fi

# --- timings -----------------------------------------------------------------
median() { sort -n | awk '{a[NR]=$1} END {if (NR) printf "%.2f", (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2) * 1000}'; }
lat() { for _ in $(seq 50); do curl -s -m 30 -o /dev/null -w '%{time_total}\n' "$@"; done | median; }
say "median of 50: edge 404 with a token $(lat -H "$AUTH" "$EDGE/v1/teachers") ms," \
	"edge 400 after the cached token verifies $(lat -H "$AUTH" "$EDGE/v1/tiers?bogus=1") ms," \
	"edge 401 without a token $(lat "$EDGE/v1/tiers") ms," \
	"forwarded 200 $(lat -H "$AUTH" "$EDGE/v1/tiers") ms," \
	"direct 200 $(lat -H "$AUTH" "$ORIGIN/v1/tiers") ms"

if grep -q "instance retired\|request failed" "$TMP/wrangler.log" "$TMP/wrangler2.log"; then
	fail "worker log" "the host logged failures:"
	grep -A3 "instance retired\|request failed" "$TMP/wrangler.log" "$TMP/wrangler2.log" | head -20
fi

grep -o '\[edge host\] module instantiated.*configured in [0-9.]* ms' "$TMP/wrangler.log" | head -1 | sed 's/^/smoke: /' || true

if [ "${SMOKE_HOLD:-}" = 1 ]; then
	say "holding the stack (SMOKE_HOLD=1): EDGE=$EDGE ORIGIN=$ORIGIN TOKEN=$TOKEN; stop with Ctrl-C"
	while :; do sleep 1; done
fi

if [ "$FAILS" -gt 0 ]; then
	say "$FAILS check(s) FAILED; wrangler log:"
	tail -40 "$TMP/wrangler.log"
	exit 1
fi
say "all checks passed"
