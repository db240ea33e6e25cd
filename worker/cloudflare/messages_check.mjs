// worker.mjs against the one definition of the module's messages,
// shared/testdata/edge-messages.txt (docs/edge.md, "Module ABI"), checked
// in plain Node. worker/wazero's TestMessagesSchema runs it when node is
// installed, and so does smoke.sh:
//
//   node worker/cloudflare/messages_check.mjs <worker.mjs> [<worker.wasm>, unused]
//
// Behind the worker is a scripted module (plain JS behind the ABI, in
// place of the .wasm) that records every message the host sends it and
// answers outputs that make the host send each kind: configure, start
// (with a body: bodySha256), resume (an answered subrequest and a failed
// one), and wake (a request parked on a background JWKS refresh). Each
// message must hold exactly the members the file lists, of their types.
// The members the host reads of an output (its "background", its
// "refresh", configure's answer) are read from worker.mjs's source: each must be one the file
// lists, and each the file lists must be read, but "lease" (a leased
// 304's usage, which only a host with a usage log keeps). Last, an answer
// the host writes itself carries a request id of the file's hostErrorId
// form. It prints PASS/FAIL lines and exits non-zero on a failure.
import fs from "node:fs";
import net from "node:net";
import { cleanUp, loadWorker } from "./node_load.mjs";

const [workerPath] = process.argv.slice(2);
// The module's messages, defined once in this repository's shared/testdata.
const repoRoot = new URL("../../", import.meta.url);
const schemaPath = new URL("shared/testdata/edge-messages.txt", repoRoot);
const check = (ok, what) => {
	console.log(`${ok ? "PASS" : "FAIL"} ${what}`);
	if (!ok) process.exitCode = 1;
};
const enc = new TextEncoder();
const dec = new TextDecoder();

// ---------------------------------------------------------------------------
// The file: "name ---- member:type member:type? ..." a line.

const schema = {};
for (const line of fs.readFileSync(schemaPath, "utf8").split("\n")) {
	if (line.trim() === "" || line === "#" || line.startsWith("# ")) continue;
	const [name, spec] = line.split("----").map((s) => s.trim());
	schema[name] = spec;
}
const messages = {};
for (const [name, spec] of Object.entries(schema)) {
	if (name === "hostErrorId") continue;
	messages[name] = Object.fromEntries(spec.split(/\s+/).map((m) => {
		const [member, type] = m.split(":");
		return [member, { type: type.replace(/\?$/, ""), optional: type.endsWith("?") }];
	}));
}
const hostErrorId = new RegExp(schema.hostErrorId);

/** What is wrong with value as the message called name: "" when nothing. */
function problems(name, value, at = name) {
	const members = messages[name];
	if (typeof value !== "object" || value === null || Array.isArray(value)) return `${at}: not an object`;
	const out = [];
	for (const [member, v] of Object.entries(value)) {
		const m = members[member];
		if (!m) {
			out.push(`${at}.${member}: not in the file`);
			continue;
		}
		const bad = typeProblem(m.type, v, `${at}.${member}`);
		if (bad) out.push(bad);
	}
	for (const [member, m] of Object.entries(members)) {
		if (!m.optional && !(member in value)) out.push(`${at}.${member}: missing`);
	}
	return out.join("; ");
}

function typeProblem(type, v, at) {
	const isInt = (x) => Number.isInteger(x);
	const ok = {
		string: () => typeof v === "string",
		int: () => isInt(v),
		bool: () => typeof v === "boolean",
		pairs: () => Array.isArray(v) && v.every((p) => Array.isArray(p) && p.length === 2 && p.every((s) => typeof s === "string")),
		strings: () => Array.isArray(v) && v.every((s) => typeof s === "string"),
		ints: () => Array.isArray(v) && v.every(isInt),
	}[type];
	if (ok) return ok() ? "" : `${at}: not ${type}: ${JSON.stringify(v)}`;
	return problems(type, v, at);
}

// ---------------------------------------------------------------------------
// The scripted module (as signatures_check.mjs's): node_load.mjs gives the
// worker globalThis.__lecternWasm as its module; a Scripted in its place
// is instantiated here, its exports the ABI's over a JS script.

class Scripted {
	constructor(script) {
		this.script = script;
	}
}
const realImports = WebAssembly.Module.imports;
WebAssembly.Module.imports = (m) => (m instanceof Scripted ? [] : realImports(m));
const realInstantiate = WebAssembly.instantiate;
WebAssembly.instantiate = (m, imports) => {
	if (!(m instanceof Scripted)) return realInstantiate(m, imports);
	const memory = new WebAssembly.Memory({ initial: 64 });
	const IN = 8, OUT = 2 << 20;
	const run = (fn) => (ptr, len) => {
		const msg = JSON.parse(dec.decode(new Uint8Array(memory.buffer, ptr, len)));
		const out = enc.encode(JSON.stringify(m.script(fn, msg)));
		new Uint8Array(memory.buffer, OUT, out.length).set(out);
		return (BigInt(OUT) << 32n) | BigInt(out.length);
	};
	const alloc = (n) => (n <= OUT - IN ? IN : 0);
	return Promise.resolve({ exports: { memory, alloc, configure: run("configure"), start: run("start"), resume: run("resume") } });
};

// An origin that answers every request 200 with a small JSON body, and a
// port nothing listens on.
const server = net.createServer((sock) => {
	sock.on("error", () => {});
	sock.once("data", () => sock.end('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}'));
});
await new Promise((r) => server.listen(0, "127.0.0.1", r));
const origin = `http://127.0.0.1:${server.address().port}`;
const dead = await new Promise((r) => {
	const s = net.createServer().listen(0, "127.0.0.1", () => {
		const port = s.address().port;
		s.close(() => r(`http://127.0.0.1:${port}`));
	});
});

// The script, by the path of each start: /sub (a subrequest to the
// origin, then a response), /fail (a subrequest to a dead port, then a
// response), /park (parked on a refresh of the JWKS, woken by its done),
// /bogus (an output of no kind the host knows: the host's own 500).
const got = { configure: [], start: [], resume: [], wake: [] };
let n = 0;
const script = (fn, msg) => {
	if (fn === "configure") {
		got.configure.push(msg);
		return { kind: "configured" };
	}
	if (fn === "start") {
		got.start.push(msg);
		const h = ++n;
		switch (msg.path) {
			case "/sub":
				return { kind: "subrequest", handle: h, method: "GET", url: origin + "/internal/gate", headers: [["Accept", "application/json"]],
					forward: false, retry: "any" };
			case "/fail":
				return { kind: "subrequest", handle: h, method: "POST", url: dead + "/internal/gate", headers: [], forward: false, retry: "unsent",
					body: "{}" };
			case "/park":
				return { kind: "park", handle: h, refresh: { handle: 1000 + h, url: origin + "/jwks", retry: "any" } };
		}
		return { kind: "bogus", handle: h };
	}
	if (msg.wake) {
		got.wake.push(msg);
		return { kind: "response", handle: msg.handle, status: 204, headers: [] };
	}
	got.resume.push(msg);
	if (msg.handle >= 1000) return { kind: "done", handle: msg.handle, wake: [msg.handle - 1000] };
	return { kind: "response", handle: msg.handle, status: 200, headers: [["Content-Type", "text/plain"]], body: "ok" };
};

globalThis.__lecternWasm = new Scripted(script);
const worker = await loadWorker(workerPath, "");
const env = { ORIGIN_URL: `${origin},${origin}/second`, JWKS_URL: origin + "/jwks", ISSUER: "http://idp.test", AUDIENCE: "lectern-api",
	LECTERN_SECRET: "0123456789abcdef0123456789abcdef", PUBLIC_URL: "http://edge.test" };
const waits = [];
const ctx = { waitUntil: (p) => waits.push(p) };
const send = async (method, path, body) => {
	const r = await worker.fetch(new Request("http://edge.test" + path, { method, body, duplex: "half" }), env, ctx);
	const text = await r.text();
	await Promise.allSettled(waits.splice(0));
	return { status: r.status, id: r.headers.get("X-Request-Id"), text };
};
const quiet = console.error;
console.error = console.warn = () => {}; // the host logs the bogus output's failure
let sub, fail, park, bogus;
try {
	sub = await send("POST", "/sub", "a body");
	fail = await send("GET", "/fail");
	park = await send("GET", "/park");
	bogus = await send("GET", "/bogus");
} finally {
	console.error = quiet;
}
check(sub.status === 200 && fail.status === 200 && park.status === 204, `the scripted requests: ${sub.status} ${fail.status} ${park.status}`);

// The messages the host sent.
for (const [name, list] of Object.entries(got)) {
	const bad = list.map((m) => problems(name, m)).filter(Boolean);
	check(list.length > 0 && bad.length === 0, `${name}: ${list.length} sent, each as the file lists it${bad.length ? ": " + bad.join(" | ") : ""}`);
}
check(got.start.some((m) => "bodySha256" in m) && got.resume.some((m) => m.status === 0 && "error" in m) &&
	got.resume.some((m) => "body" in m) && got.configure.some((m) => "origins" in m),
	"the optional members sent when they apply: bodySha256, a failed resume's error, an answer's body, configure's origins");

// The members the host reads of an output, from its source.
const src = fs.readFileSync(workerPath, "utf8");
const read = new Set([...src.matchAll(/\b(?:out|sub|bg|refresh)\.([a-zA-Z]\w*)\b/g)].map((m) => m[1]).filter((m) => !(m in Array.prototype)));
const listed = new Set(["output", "background", "refresh", "configured"].flatMap((name) => Object.keys(messages[name])));
const unknown = [...read].filter((m) => !listed.has(m));
check(unknown.length === 0, `every output member worker.mjs reads is in the file${unknown.length ? ": not " + unknown.join(", ") : ""}`);
const unread = [...listed].filter((m) => !read.has(m) && m !== "lease");
check(unread.length === 0, `every output member in the file, "lease" aside, is read by worker.mjs${unread.length ? ": not " + unread.join(", ") : ""}`);

// The host's own answer.
let body = {};
try {
	body = JSON.parse(bogus.text);
} catch {}
check(bogus.status === 500 && hostErrorId.test(bogus.id ?? "") && body.error?.requestId === bogus.id,
	`the host's own 500: X-Request-Id ${bogus.id} of the form ${hostErrorId.source}, the body's requestId the same`);

server.close();
cleanUp();
process.exit();
