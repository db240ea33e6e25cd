#!/usr/bin/env bash
# The production deployment of the Cloudflare worker, checked without
# deploying (CI runs it from .ci/run):
#
#   bash worker/cloudflare/deploy_check.sh [wrangler.toml]
#
# 1. [env.production.vars] sets every var the worker reads (worker.mjs,
#    configFrom), none of them names a loopback or unspecified host
#    (127.0.0.0/8, localhost, ::1, 0.0.0.0: wrangler dev's defaults in
#    [vars] are not inherited, but a copied one would be), the URLs are
#    https, and the secrets (LECTERN_SECRET, LECTERN_URL_KEYS) are not vars
#    anywhere in the file: they go in with `wrangler secret put`.
# 2. `wrangler deploy --dry-run --env production` builds the bundle with
#    the module (build/worker.wasm; `make worker` when missing).
#
# Before checking the given file, the script checks that step 1 refuses a
# copy of it whose production ORIGIN_URL is loopback: a check that passed
# everything would fail here. Exits non-zero on any failure.
# DEPLOY_CHECK_SKIP_WRANGLER=1 runs step 1 only (no Node needed).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
CONFIG=${1:-$ROOT/wrangler.toml}
WRANGLER_VERSION=4.86.0
WRANGLER=$ROOT/.ci/node/node_modules/.bin/wrangler

say() { printf '%s\n' "deploy-check: $*"; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/lectern-deploy.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

# production_vars FILE: the NAME=VALUE lines of [env.production.vars]
# (the plain `KEY = "value"` form this repository's wrangler.toml uses).
production_vars() {
	awk '
		/^[[:space:]]*\[/ { in_vars = ($0 ~ /^[[:space:]]*\[env\.production\.vars\][[:space:]]*$/); next }
		in_vars && /^[[:space:]]*[A-Za-z_][A-Za-z0-9_]*[[:space:]]*=/ {
			line = $0; sub(/[[:space:]]+#.*$/, "", line)
			name = line; sub(/[[:space:]]*=.*/, "", name); gsub(/[[:space:]]/, "", name)
			value = line; sub(/^[^=]*=[[:space:]]*/, "", value); gsub(/^"|"[[:space:]]*$/, "", value)
			print name "=" value
		}' "$1"
}

# check_vars FILE: step 1; prints each problem, returns 1 when any.
check_vars() {
	local file=$1 bad=0 vars name value
	vars=$(production_vars "$file")
	for name in ORIGIN_URL JWKS_URL ISSUER AUDIENCE PUBLIC_URL; do
		grep -q "^$name=." <<<"$vars" || { say "[env.production.vars] lacks $name"; bad=1; }
	done
	while IFS='=' read -r name value; do
		[ -n "$name" ] || continue
		case "$name" in LECTERN_SECRET | LECTERN_URL_KEYS | LECTERN_SECRET_ACCEPT)
			say "$name is a var: it is a secret (wrangler secret put $name --env production)"; bad=1; continue ;;
		esac
		# Each URL of the value (ORIGIN_URL may list several).
		for url in ${value//,/ }; do
			case "$url" in http://* | https://*) ;; *) continue ;; esac
			host=${url#*://}; host=${host%%/*}
			case "$host" in \[*) host=${host%%]*}; host=${host#[} ;; *) host=${host%%:*} ;; esac
			case "$host" in
			127.* | localhost | localhost.* | ::1 | 0.0.0.0 | 0:0:0:0:0:0:0:1 | "")
				say "production $name names a loopback host: $url"; bad=1 ;;
			esac
			case "$url" in http://*) say "production $name is not https: $url"; bad=1 ;; esac
		done
	done <<<"$vars"
	if grep -qE '^[[:space:]]*(LECTERN_SECRET|LECTERN_URL_KEYS|LECTERN_SECRET_ACCEPT)[[:space:]]*=' "$file"; then
		say "a secret is set as a var in $file: use wrangler secret put"; bad=1
	fi
	return "$bad"
}

# The check itself, against a bad copy first.
sed '/^\[env\.production\.vars\]/,/^\[/ s#^ORIGIN_URL = .*#ORIGIN_URL = "https://origin.lectern.example,http://127.0.0.1:8080"#' \
	"$CONFIG" >"$TMP/bad.toml"
if cmp -s "$CONFIG" "$TMP/bad.toml"; then say "could not make a bad copy of $CONFIG (no production ORIGIN_URL?)"; exit 1; fi
if check_vars "$TMP/bad.toml" >"$TMP/bad.out"; then
	say "FAIL: the check passed a production ORIGIN_URL listing http://127.0.0.1:8080"; exit 1
fi
grep -q "loopback host: http://127.0.0.1:8080" "$TMP/bad.out" ||
	{ cat "$TMP/bad.out"; say "FAIL: the bad copy was refused, but not for its loopback origin"; exit 1; }
say "PASS a production var naming a loopback host is refused"

check_vars "$CONFIG" || { say "FAIL: $CONFIG's production environment"; exit 1; }
say "PASS [env.production.vars]: every var set, none loopback, all https, no secret as a var"

if [ "${DEPLOY_CHECK_SKIP_WRANGLER:-}" = 1 ]; then exit 0; fi

# --- wrangler deploy --dry-run ------------------------------------------------
if [ ! -x "$WRANGLER" ] || [ "$("$WRANGLER" --version 2>/dev/null)" != "$WRANGLER_VERSION" ]; then
	say "installing wrangler@$WRANGLER_VERSION into .ci/node"
	npm install --no-save --no-audit --no-fund --prefix "$ROOT/.ci/node" "wrangler@$WRANGLER_VERSION" >"$TMP/npm.log" 2>&1 ||
		{ cat "$TMP/npm.log"; exit 1; }
fi
[ -s build/worker.wasm ] || make worker
if WRANGLER_SEND_METRICS=false WRANGLER_HIDE_BANNER=true CI=1 \
	"$WRANGLER" deploy --dry-run --env production --config "$CONFIG" --outdir "$TMP/out" >"$TMP/deploy.log" 2>&1; then
	say "PASS wrangler deploy --dry-run --env production ($(du -sk "$TMP/out" | cut -f1) KiB bundle)"
else
	cat "$TMP/deploy.log"; say "FAIL: wrangler deploy --dry-run --env production"; exit 1
fi
