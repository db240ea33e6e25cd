package wazero

import (
	"bytes"
	"encoding/binary"
)

// Toolchain names the toolchain that built a module, from its custom
// sections (the builds themselves are worker/wasmbuild's, which no shipped
// command links): standard Go writes "go:buildid" and a "producers" section
// naming its version; TinyGo (with -no-debug) writes neither.
func Toolchain(wasm []byte) string {
	if len(wasm) < 8 || !bytes.Equal(wasm[:4], []byte("\x00asm")) {
		return "unknown (not a WebAssembly module)"
	}
	var buildID bool
	var producers []byte
	for b := wasm[8:]; len(b) > 0; {
		id := b[0]
		size, n := binary.Uvarint(b[1:])
		if n <= 0 || uint64(len(b)-1-n) < size {
			break
		}
		sec := b[1+n : 1+n+int(size)]
		b = b[1+n+int(size):]
		if id != 0 {
			continue
		}
		nameLen, m := binary.Uvarint(sec)
		if m <= 0 || uint64(len(sec)-m) < nameLen {
			continue
		}
		switch name := string(sec[m : m+int(nameLen)]); name {
		case "go:buildid":
			buildID = true
		case "producers":
			producers = sec[m+int(nameLen):]
		}
	}
	switch {
	case bytes.Contains(producers, []byte("TinyGo")), bytes.Contains(producers, []byte("tinygo")):
		return "TinyGo"
	case buildID:
		// The version is a length-prefixed string of the producers section.
		if i := bytes.Index(producers, []byte("go1.")); i > 0 && i+int(producers[i-1]) <= len(producers) {
			return "standard Go (" + string(producers[i:i+int(producers[i-1])]) + ")"
		}
		return "standard Go"
	default:
		return "TinyGo"
	}
}
