// Package wasmtest holds the tests that load the built edge module
// (worker/wasm, docs/edge.md) in wazero and drive real HTTP through it
// against a real origin: every scenario runs through the edge and directly
// against the origin and must get the same answer. The suite runs against
// every build of the module: standard Go always, TinyGo when it is
// installed (tools/tinygo/build.sh). The wazero host itself is
// worker/wazero, which the local edge (worker/cmd/edge) also runs: this package
// holds tests only.
package wasmtest
