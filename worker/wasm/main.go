// Command wasm is the edge's WebAssembly module: a WASI (wasip1) reactor
// that exports the ABI of docs/edge.md (alloc, configure, start, resume,
// control) over worker/pipeline, and holds no logic of its own. It builds with
// standard Go and with TinyGo from this one source:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o worker.wasm ./worker/wasm
//	tinygo build -target=wasip1 -buildmode=c-shared -scheduler=none -no-debug -opt=2 -o worker.wasm ./worker/wasm
//
// It starts no goroutine: -scheduler=none forbids them.
package main

// main is never called in a reactor; the host calls _initialize and then
// the exports.
func main() {}
