// Package wasmtest holds the tests that load the built edge module
// (worker/wasm, docs/edge.md) in wazero and drive real HTTP through it
// against a real origin: every scenario runs through the edge and directly
// against the origin and must get the same answer.
//
// The module is built by standard Go always and by TinyGo when it is
// installed (tools/tinygo/build.sh); TinyGo's is the deployed build. Every
// test runs on the deployed build (forDeployedBuild); the representative
// ones, whose outcome the compiler could change (the parity table, input
// and query vectors, conditional requests, signatures, the reactor's
// calls, leased 304s), run on both (forEachBuild). The builds are kept by
// the hash of their sources (internal/buildcache), so a run with unchanged
// worker sources compiles nothing. The wazero host itself is worker/wazero,
// which the edge command (worker/cmd/edge) also runs: this package holds
// tests only.
package wasmtest
