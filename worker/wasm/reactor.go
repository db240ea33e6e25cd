//go:build wasip1

package main

import (
	"errors"
	"unsafe"

	"github.com/lectern-api/lectern/worker/pipeline"
)

// The reactor's state: the pipeline, the buffers the host writes messages
// into, and the last output, which the host reads before its next call.
// A reactor's exports are its only entry points, so package state is
// where it lives.
var (
	edge   *pipeline.Pipeline
	inputs = map[uint32][]byte{} // by address: kept alive until consumed
	spare  []byte                // the last consumed buffer, reused by the next alloc
	// current is the message being read, kept reachable until the call's
	// result: a slice read out of a map is no root for TinyGo's collector,
	// and one too large to be spare would otherwise be freed mid-call.
	current []byte
	output  []byte
)

// maxSpare bounds the buffer kept for reuse between messages.
const maxSpare = 64 << 10

// alloc returns a buffer of size bytes for the host to write a message
// into. The buffer lives until the next configure, start or resume call,
// which consumes it; 0 means the size is refused (over
// pipeline.MaxMessage).
//
//go:wasmexport alloc
func alloc(size uint32) uint32 {
	if size > pipeline.MaxMessage {
		return 0
	}
	var b []byte
	if len(inputs) == 0 && size > 0 && int(size) <= cap(spare) {
		b, spare = spare[:size], nil
	} else {
		b = make([]byte, max(size, 1))
	}
	ptr := uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
	inputs[ptr] = b
	return ptr
}

// input returns the message at ptr, which alloc handed out, and lets go
// of every buffer: each is valid until the next consuming call.
func input(ptr, size uint32) ([]byte, bool) {
	b, ok := inputs[ptr]
	current = b
	clear(inputs)
	if !ok || int(size) > len(b) {
		return nil, false
	}
	if cap(b) <= maxSpare {
		// The pipeline copies what it keeps out of a message, so the
		// buffer is free again once this call returns.
		spare = b
	}
	return b[:size], true
}

// result keeps out alive until the next call and returns ptr<<32 | len.
func result(out []byte) uint64 {
	output, current = out, nil // out is written: the message is read
	if len(out) == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(out))))<<32 | uint64(len(out))
}

var (
	errNoBuffer     = errors.New("wasm: message not in a buffer from alloc")
	errUnconfigured = errors.New("wasm: configure first")
)

// configure sets the pipeline up; it answers {"kind":"configured"} or
// {"kind":"error","error":"..."}.
//
//go:wasmexport configure
func configure(ptr, size uint32) uint64 {
	b, ok := input(ptr, size)
	if !ok {
		return result(pipeline.ConfigResult(errNoBuffer))
	}
	cfg, err := pipeline.ParseConfig(b)
	if err != nil {
		return result(pipeline.ConfigResult(err))
	}
	edge = pipeline.New(cfg)
	return result(pipeline.ConfigResult(nil))
}

//go:wasmexport start
func start(ptr, size uint32) uint64 {
	b, ok := input(ptr, size)
	if !ok {
		return result(pipeline.ConfigResult(errNoBuffer))
	}
	if edge == nil {
		return result(pipeline.ConfigResult(errUnconfigured))
	}
	return result(edge.HandleStart(b))
}

//go:wasmexport resume
func resume(ptr, size uint32) uint64 {
	b, ok := input(ptr, size)
	if !ok {
		return result(pipeline.ConfigResult(errNoBuffer))
	}
	if edge == nil {
		return result(pipeline.ConfigResult(errUnconfigured))
	}
	return result(edge.HandleResume(b))
}

// control runs a host's control message (docs/edge.md: flush the lease
// reports, or revoke leases).
//
//go:wasmexport control
func control(ptr, size uint32) uint64 {
	b, ok := input(ptr, size)
	if !ok {
		return result(pipeline.ConfigResult(errNoBuffer))
	}
	if edge == nil {
		return result(pipeline.ConfigResult(errUnconfigured))
	}
	return result(edge.HandleControl(b))
}
