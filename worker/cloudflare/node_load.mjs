// Loads worker.mjs in plain Node, for the checks beside it
// (refresh_check.mjs, origins_check.mjs): its import of build/worker.wasm,
// which only wrangler's bundler resolves, becomes a WebAssembly.Module
// compiled from the module at wasmPath. Each load is a fresh copy, so
// one isolate's state (the instance, the origins' order) is not the next
// one's. Node's fetch() needs `duplex: "half"` to send a stream body,
// which workerd's does not: loading adds it.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";

const IMPORT = 'import wasmModule from "../../build/worker.wasm";';
let dir = null;
let loads = 0;

export async function loadWorker(workerPath, wasmPath) {
	if (!globalThis.fetch.lecternDuplex) {
		const nodeFetch = globalThis.fetch;
		globalThis.fetch = (url, init) =>
			nodeFetch(url, init?.body instanceof ReadableStream ? { ...init, duplex: "half" } : init);
		globalThis.fetch.lecternDuplex = true;
	}
	const src = fs.readFileSync(workerPath, "utf8");
	if (!src.includes(IMPORT)) throw new Error(`${workerPath} no longer imports the module as ${IMPORT}`);
	globalThis.__lecternWasm ??= new WebAssembly.Module(fs.readFileSync(wasmPath));
	dir ??= fs.mkdtempSync(path.join(os.tmpdir(), "lectern-worker-"));
	const file = path.join(dir, `worker-${++loads}.mjs`);
	fs.writeFileSync(file, src.replace(IMPORT, "const wasmModule = globalThis.__lecternWasm;"));
	return (await import(pathToFileURL(file).href)).default;
}

/** Removes the copies. */
export function cleanUp() {
	if (dir) fs.rmSync(dir, { recursive: true, force: true });
	dir = null;
}
