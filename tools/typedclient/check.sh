#!/usr/bin/env bash
# The README's typed client ("A typed client"), checked as a user would
# paste it (CI runs this from .ci/run when npm is present):
#
#   bash tools/typedclient/check.sh
#
# Installs the pinned openapi-fetch, openapi-typescript and TypeScript into
# .ci/node/typed (gitignored), starts an origin on a small corpus, generates
# lectern.d.ts from its GET /v1/openapi.json, takes the README's ts block
# (the one after the `typed-client` marker) as client.mts unchanged,
# compiles it with --strict and runs it with Node against the origin. It
# passes when the block type-checks, its lesson request with
# include: ["quiz", "media"] answers 200 (the API refuses the exploded
# include=quiz&include=media, checked here too), and its revalidation with
# the declared If-None-Match header answers 304. Ports: TYPED_PORT_BASE
# (default 28080) and the three after it.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
NODE_DIR=$ROOT/.ci/node/typed
PKGS=(openapi-fetch@0.17.0 openapi-typescript@7.13.0 typescript@5.9.3 @types/node@20.19.43)
BASE=${TYPED_PORT_BASE:-28080}
ORIGIN=http://127.0.0.1:$BASE
IDP=http://127.0.0.1:$((BASE + 1))
ADMIN=http://127.0.0.1:$((BASE + 2))
ADMIN_TOKEN=typed-client-admin-token
say() { printf '%s\n' "typed-client: $*"; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/lectern-typed.XXXXXX")
PID=
cleanup() {
	local rc=$?
	[ -z "$PID" ] || { kill -TERM "$PID" 2>/dev/null; wait "$PID" 2>/dev/null || true; }
	rm -rf "$TMP"
	exit "$rc"
}
trap cleanup EXIT

# --- the packages the README installs -----------------------------------------
want=$(printf '%s\n' "${PKGS[@]}")
if [ "$(cat "$NODE_DIR/.pinned" 2>/dev/null)" != "$want" ]; then
	say "installing ${PKGS[*]} into .ci/node/typed"
	npm install --no-save --no-audit --no-fund --prefix "$NODE_DIR" "${PKGS[@]}" >"$TMP/npm.log" 2>&1 ||
		{ cat "$TMP/npm.log"; exit 1; }
	printf '%s\n' "$want" >"$NODE_DIR/.pinned"
fi
BIN=$NODE_DIR/node_modules/.bin

# --- an origin ------------------------------------------------------------------
go run ./tools/corpusgen -small -out "$TMP/corpus" >/dev/null
go build -o "$TMP/origin" ./origin/cmd/origin
LECTERN_DB="$TMP/lectern.db" LECTERN_CORPUS="$TMP/corpus" LECTERN_SECRET=typed-client-secret-0123456789abcdef \
	LECTERN_ORIGIN_ADDR="127.0.0.1:$BASE" LECTERN_IDP_ADDR="127.0.0.1:$((BASE + 1))" \
	LECTERN_ADMIN_ADDR="127.0.0.1:$((BASE + 2))" LECTERN_ADMIN_TOKEN=$ADMIN_TOKEN \
	"$TMP/origin" >"$TMP/origin.log" 2>&1 &
PID=$!
for _ in $(seq 300); do
	curl -fs -o /dev/null -H "Authorization: Bearer $ADMIN_TOKEN" "$ADMIN/admin/v1/health" && break
	kill -0 "$PID" 2>/dev/null || { cat "$TMP/origin.log"; say "the origin exited"; exit 1; }
	sleep 0.1
done
curl -fs -o /dev/null -H "Authorization: Bearer $ADMIN_TOKEN" -H 'Content-Type: application/json' \
	-d '{"orgId":"typed","contentGrants":["topics","college","high","middle","primary"]}' "$ADMIN/admin/v1/orgs"
client=$(curl -fs -H "Authorization: Bearer $ADMIN_TOKEN" -H 'Content-Type: application/json' \
	-d '{"scopes":["content.read"]}' "$ADMIN/admin/v1/orgs/typed/clients")
cid=$(sed -n 's/.*"clientId":"\([^"]*\)".*/\1/p' <<<"$client")
csecret=$(sed -n 's/.*"clientSecret":"\([^"]*\)".*/\1/p' <<<"$client")
TOKEN=$(curl -fs -u "$cid:$csecret" -d grant_type=client_credentials -d scope=service-api/content.read \
	"$IDP/oauth2/token" | sed -n 's/.*"access_token":"\([^"]*\)".*/\1/p')
[ -n "$TOKEN" ] || { say "no token"; exit 1; }

# The exploded form is refused: the serializer setting matters.
lesson=/v1/lessons/high/algebra/1
status=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TOKEN" "$ORIGIN$lesson?include=quiz&include=media")
[ "$status" = 400 ] || { say "FAIL include=quiz&include=media answered $status, not 400: the README's serializer note is wrong"; exit 1; }
say "PASS the exploded include=quiz&include=media is 400"

# --- the README's block ---------------------------------------------------------
curl -fs "$ORIGIN/v1/openapi.json" >"$TMP/openapi.json"
cd "$TMP"
ln -s "$NODE_DIR/node_modules" node_modules
"$BIN/openapi-typescript" openapi.json -o lectern.d.ts >openapi-typescript.log 2>&1 ||
	{ cat openapi-typescript.log; say "FAIL openapi-typescript"; exit 1; }
awk '/<!-- typed-client:/ { marked = 1; next } marked && /^```ts$/ { inside = 1; next } inside && /^```$/ { exit } inside { print }' \
	"$ROOT/README.md" >client.mts
[ -s client.mts ] || { say "FAIL no ts block after the typed-client marker in README.md"; exit 1; }
"$BIN/tsc" --strict --module nodenext --target es2022 client.mts >tsc.log 2>&1 ||
	{ cat tsc.log; say "FAIL the README's client does not type-check against the served description"; exit 1; }
say "PASS the README's client type-checks (tsc --strict) against the served description"
out=$(API_URL=$ORIGIN TOKEN=$TOKEN node client.mjs 2>&1) || { printf '%s\n' "$out"; say "FAIL the README's client failed"; exit 1; }
first=$(sed -n 1p <<<"$out")
second=$(sed -n 2p <<<"$out")
case "$first" in *'W/"'*) ;; *) printf '%s\n' "$out"; say "FAIL the lesson request: no contentVersion and ETag"; exit 1 ;; esac
[ "$second" = 304 ] || { printf '%s\n' "$out"; say "FAIL the revalidation with If-None-Match answered $second, not 304"; exit 1; }
say "PASS the README's client: the lesson with include [quiz, media] ($first), then 304 with If-None-Match"
