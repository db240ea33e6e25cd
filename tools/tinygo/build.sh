#!/usr/bin/env bash
# Builds the pinned TinyGo from the Go module proxy against Debian's LLVM and
# prints, as its last line, TINYGO=<path to the tinygo binary>.
# Idempotent and cached: a second run only checks and prints. See README.md.
set -euo pipefail

TINYGO_VERSION=0.42.0
LLVM=19
ESPFLASHER_VERSION=v0.6.0   # the proxy here refuses TinyGo's v0.8.1; only flashing ESP32 boards uses it

ROOT=${LECTERN_TINYGO_ROOT:-$HOME/.cache/lectern/tinygo-$TINYGO_VERSION}
ROOT=$(realpath -m -- "$ROOT")
TINYGO=$ROOT/bin/tinygo
MARKER=.lectern-tinygo   # written into ROOT; only a ROOT holding it is ever deleted or replaced

APT_PACKAGES=(llvm-$LLVM-dev libclang-$LLVM-dev clang-$LLVM lld-$LLVM
	libclang-rt-$LLVM-dev-wasm32 wasi-libc binaryen)
# Debian's files that seed TinyGo's library cache (the module zip has no lib/ submodules).
COMPILER_RT_A=/usr/lib/llvm-$LLVM/lib/clang/$LLVM/lib/wasi/libclang_rt.builtins-wasm32.a
WASI_LIBC_A=/usr/lib/wasm32-wasi/libc.a
WASI_INCLUDE=/usr/include/wasm32-wasi
TRIPLE=wasm32-unknown-wasi-generic   # targets/wasip1.json: llvm-target + cpu

START=$SECONDS
log() { printf '[tinygo %3ds] %s\n' "$((SECONDS - START))" "$*" >&2; }
die() { printf 'tools/tinygo/build.sh: error: %s\n' "$*" >&2; exit 1; }

# tinygo_works: the binary runs (it links libLLVM-$LLVM dynamically) and the
# external tools it execs for wasm targets are installed.
tinygo_works() {
	[[ -x $TINYGO ]] && "$TINYGO" version >/dev/null 2>&1 &&
		command -v clang-$LLVM >/dev/null && command -v wasm-ld-$LLVM >/dev/null &&
		command -v wasm-opt >/dev/null
}

# The library cache TinyGo really uses: `tinygo env GOCACHE` ($XDG_CACHE_HOME or ~/.cache, + /tinygo).
cache_dir() { "$TINYGO" env GOCACHE; }

cache_seeded() {
	local c
	c=$(cache_dir) || return 1
	[[ -f $c/compiler-rt-$TRIPLE/lib.a && -f $c/wasi-libc-$TRIPLE/lib.a && -d $c/wasi-libc-$TRIPLE/include ]]
}

finish() {
	"$TINYGO" version
	printf 'TINYGO=%q\n' "$TINYGO"
	exit 0
}

# ---- fast path -------------------------------------------------------------
if tinygo_works && cache_seeded; then
	finish
fi

# One build at a time per ROOT (CI jobs or two terminals racing).
mkdir -p "$(dirname "$ROOT")"
if command -v flock >/dev/null; then
	exec 9>"$ROOT.lock"
	flock 9
	if tinygo_works && cache_seeded; then finish; fi   # built by whoever held the lock
fi

# ---- 1. Go toolchain -------------------------------------------------------
command -v go >/dev/null || die "go is not on PATH (TinyGo $TINYGO_VERSION needs Go 1.25-1.27 to build and to run)"
GOVER=$(go env GOVERSION)
case $GOVER in
go1.25 | go1.25.* | go1.26 | go1.26.* | go1.27 | go1.27.*) ;;
*) die "TinyGo $TINYGO_VERSION needs Go 1.25-1.27, found $GOVER" ;;
esac
log "using $GOVER"

# ---- 2. Debian packages (only the missing ones) ----------------------------
missing=()
for p in "${APT_PACKAGES[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
	SUDO=()
	if ((EUID != 0)); then
		command -v sudo >/dev/null || die "need root or sudo to install: ${missing[*]}"
		SUDO=(sudo)
	fi
	log "apt-get install ${missing[*]}"
	"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
	"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
else
	log "apt packages already installed"
fi
for f in "$COMPILER_RT_A" "$WASI_LIBC_A" "$WASI_INCLUDE/stdlib.h" /usr/lib/llvm-$LLVM/bin/llvm-config; do
	[[ -e $f ]] || die "expected $f from the Debian packages; it is missing"
done

# ---- 3. TinyGo itself (skipped when ROOT already holds a working binary) ----
if tinygo_works; then
	log "$TINYGO already built"
else
	if [[ -e $ROOT ]]; then
		[[ -e $ROOT/$MARKER ]] || die "$ROOT exists and was not made by this script; remove it or set LECTERN_TINYGO_ROOT"
		log "removing broken $ROOT"
		rm -rf "$ROOT"
	fi
	STAGE=$ROOT.partial
	rm -rf "$STAGE"

	log "go mod download github.com/tinygo-org/tinygo@v$TINYGO_VERSION"
	# Outside any module or workspace, so the caller's go.mod is never consulted or touched.
	json=$(cd / && GOWORK=off GOFLAGS= go mod download -json "github.com/tinygo-org/tinygo@v$TINYGO_VERSION")
	SRC=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' <<<"$json")
	[[ -n $SRC && -d $SRC ]] || die "go mod download gave no module directory: $json"

	cp -R "$SRC" "$STAGE"          # the module cache is read-only
	chmod -R u+w "$STAGE"
	touch "$STAGE/$MARKER"

	cd "$STAGE"
	log "patching: espflasher $ESPFLASHER_VERSION, empty src/net"
	GOWORK=off go mod edit -replace "tinygo.org/x/espflasher=tinygo.org/x/espflasher@$ESPFLASHER_VERSION"
	# espflasher v0.6.0's EraseFlash takes no progress callback: exactly one call to change.
	n=$(grep -c 'flasher\.EraseFlash(progressFunc)' main.go || true)
	[[ $n == 1 ]] || die "expected exactly one 'flasher.EraseFlash(progressFunc)' in main.go, found $n"
	sed -i 's/flasher\.EraseFlash(progressFunc)/flasher.EraseFlash()/' main.go
	grep -q 'flasher\.EraseFlash()' main.go || die "EraseFlash patch did not apply"
	# src/net is the tinygo-org/net submodule, which no registry serves; left an
	# empty directory, TinyGo 0.42 compiles Go's own net package instead.
	[[ ! -e src/net ]] || [[ -z $(ls -A src/net) ]] || die "src/net is not empty in the module zip"
	mkdir -p src/net

	# cgo against Debian's libLLVM; fall back to clang-$LLVM when there is no gcc/g++.
	if ! command -v "${CC:-gcc}" >/dev/null || ! command -v "${CXX:-g++}" >/dev/null; then
		export CC=clang-$LLVM CXX=clang++-$LLVM
	fi
	log "go build -tags \"llvm$LLVM osusergo\" (1-5 minutes on 2 cores, cold Go caches the longest)"
	GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=1 \
		go build -buildmode exe -buildvcs=false -o build/tinygo -tags "llvm$LLVM osusergo" .
	# TinyGo finds its root (src/, targets/, lib/) as the parent of its binary's
	# directory, so bin/tinygo inside the module copy runs as is; no wrapper.
	mv build/tinygo bin/tinygo
	rmdir build 2>/dev/null || true
	cd /
	mv "$STAGE" "$ROOT"
	"$TINYGO" version >/dev/null || die "$TINYGO was built but does not run"
fi

# ---- 4. seed TinyGo's library cache from Debian's builds ---------------------
# The module zip has no lib/wasi-libc or lib/compiler-rt sources; TinyGo takes a
# prebuilt <cache>/<lib>-<triple>-<cpu>/lib.a when present.
CACHE=$(cache_dir)
[[ -n $CACHE ]] || die "tinygo env GOCACHE printed nothing"
seed() { # seed NAME ARCHIVE [INCLUDE_DIR]
	local dir=$CACHE/$1-$TRIPLE tmp
	if [[ -f $dir/lib.a && ( -z ${3:-} || -d $dir/include ) ]]; then
		log "cache: $dir already seeded"
		return
	fi
	log "cache: seeding $dir"
	mkdir -p "$dir"
	tmp=$(mktemp -d "$dir/seed.XXXXXX")
	if [[ -n ${3:-} && ! -d $dir/include ]]; then
		cp -R "$3" "$tmp/include"
		chmod 755 "$tmp/include"
		mv -T "$tmp/include" "$dir/include"
	fi
	# lib.a last: TinyGo treats its presence as "library complete".
	cp "$2" "$tmp/lib.a"
	mv -f "$tmp/lib.a" "$dir/lib.a"
	rmdir "$tmp"
}
seed compiler-rt "$COMPILER_RT_A"
seed wasi-libc "$WASI_LIBC_A" "$WASI_INCLUDE"

tinygo_works && cache_seeded || die "$TINYGO is not usable after the build"
log "done: $ROOT ($(du -sh "$ROOT" | cut -f1))"
finish
