// The signature's host and body in worker.mjs (docs/edge.md, "Module ABI",
// "Several origins"), checked in plain Node. The signature (X-Lectern-Edge,
// shared/edgesig) covers the receiving host and the SHA-256 of the body,
// so the host must: read the client's body before start (at most 65,537
// bytes, param.MaxBody + 1) and send its hash as bodySha256; forward
// exactly those bytes, with their Content-Length; configure the module
// with "origins" when ORIGIN_URL lists several; and send each origin, on
// every attempt (failover included), its own entry of an output's
// "signatures", for forwards, gate calls and background calls alike.
// smoke.sh runs it:
//
//   node worker/cloudflare/signatures_check.mjs <worker.mjs> <worker.wasm>
//
// Two parts. First a scripted module (plain JS behind the ABI, in place of
// the .wasm) whose signatures name their request, call and origin index
// ("fwd-3-1"), so that the origins can tell exactly which value reached
// them; it also records the configure and start messages. Then the real
// module, behind origins that verify each signature independently of
// shared/edgesig, from its documented form (v3: length-prefixed fields,
// the signed header fields named and their values,
// HMAC-SHA256 under subkey.Derive(secret, "gate/<purpose>")), for their
// own host and the body they received. Each case loads a fresh copy of the
// worker (a new isolate). It prints PASS/FAIL lines and exits non-zero on
// a failure.
import crypto from "node:crypto";
import fs from "node:fs";
import net from "node:net";
import { cleanUp, loadWorker } from "./node_load.mjs";

const [workerPath, wasmPath] = process.argv.slice(2);
const FORWARDED = "/.well-known/oauth-protected-resource"; // the real module forwards it without a token, any method
const MAX = 64 * 1024 + 1; // param.MaxBody + 1
const SECRET = "0123456789abcdef0123456789abcdef";
const check = (ok, what) => {
	console.log(`${ok ? "PASS" : "FAIL"} ${what}`);
	if (!ok) process.exitCode = 1;
};
const sha256 = (b) => crypto.createHash("sha256").update(b).digest("hex");
const enc = new TextEncoder();
const dec = new TextDecoder();
const servers = [];

// ---------------------------------------------------------------------------
// Origins: raw TCP servers that record each request as it arrived (its
// header fields as sent, its body bytes) and answer it, or reset the
// connection unanswered once they have read it whole.

/** An origin named name; reset: it resets every connection after reading the request. */
async function origin(name, { reset = false, answer = null } = {}) {
	const o = { name, got: [] };
	const srv = net.createServer((sock) => {
		let buf = Buffer.alloc(0);
		sock.on("error", () => {});
		sock.on("data", (d) => {
			buf = Buffer.concat([buf, d]);
			for (;;) {
				const req = parseRequest(buf);
				if (!req) return;
				buf = buf.subarray(req.size);
				req.origin = o;
				o.got.push(req);
				if (reset) {
					sock.resetAndDestroy();
					return;
				}
				const body = JSON.stringify({ origin: name, received: req.body.length, ...(answer ? answer(req) : {}) });
				sock.write(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
			}
		});
	});
	servers.push(srv);
	await new Promise((r) => srv.listen(0, "127.0.0.1", r));
	o.host = `127.0.0.1:${srv.address().port}`;
	o.url = `http://${o.host}`;
	return o;
}

/** One whole request at the start of buf (Content-Length or chunked framing), or null. */
function parseRequest(buf) {
	const end = buf.indexOf("\r\n\r\n");
	if (end < 0) return null;
	const lines = buf.subarray(0, end).toString("latin1").split("\r\n");
	const [method, target] = lines[0].split(" ");
	const fields = lines.slice(1).map((l) => {
		const i = l.indexOf(":");
		return [l.slice(0, i).trim().toLowerCase(), l.slice(i + 1).trim()];
	});
	const all = (name) => fields.filter(([n]) => n === name).map(([, v]) => v);
	let at = end + 4;
	let body;
	if (all("transfer-encoding").some((v) => /chunked/i.test(v))) {
		const parts = [];
		for (;;) {
			const nl = buf.indexOf("\r\n", at);
			if (nl < 0) return null;
			const n = parseInt(buf.subarray(at, nl).toString(), 16);
			if (buf.length < nl + 2 + n + 2) return null;
			parts.push(buf.subarray(nl + 2, nl + 2 + n));
			at = nl + 2 + n + 2;
			if (n === 0) break;
		}
		body = Buffer.concat(parts);
	} else {
		const n = Number(all("content-length")[0] ?? 0);
		if (buf.length < at + n) return null;
		body = buf.subarray(at, at + n);
		at += n;
	}
	return { method, target, all, header: (name) => all(name)[0], body: Buffer.from(body), size: at };
}

/** The URL of a port nothing listens on. */
async function deadOrigin() {
	const srv = net.createServer();
	await new Promise((r) => srv.listen(0, "127.0.0.1", r));
	const url = `http://127.0.0.1:${srv.address().port}`;
	await new Promise((r) => srv.close(r));
	return url;
}

// ---------------------------------------------------------------------------
// The scripted module. node_load.mjs gives the worker globalThis.__lecternWasm
// as its module; a Scripted in its place is instantiated here, its exports
// the ABI's (alloc, configure, start, resume, memory) over a JS script.

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
	const memory = new WebAssembly.Memory({ initial: 64 }); // 4 MiB: messages in the first 2, outputs above
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

/**
 * A module in the manner of worker/pipeline: each request (its handle n)
 * optionally gated first (POST /internal/gate), then forwarded with the
 * client's fields (Host, X-Request-Id and X-Lectern-* aside), its
 * passthrough answer the origin's. Each call's X-Lectern-Edge is
 * "<call>-<n>-0", and with several origins its signatures
 * "<call>-<n>-<i>" for origin i. With background, each start's output
 * carries a background call (bgMethod, POST by default) signed the same
 * way ("bg"). With answer, a request is answered 204 by the module at
 * once, no call of its own. Every call carries the retry mark the module
 * gives its method (retryOf, worker/pipeline's).
 */
const retryOf = (method) => (["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"].includes(method) ? "any" : "unsent");

function scripted({ gate = false, background = false, bgMethod = "POST", answer = false } = {}) {
	const rec = { configure: null, starts: [], bgResumes: [] };
	let origins = [];
	let n = 0;
	const stage = new Map();
	const signed = (call, h, headers) => ({
		headers: [...headers, ["X-Lectern-Edge", `${call}-${h}-0`]],
		...(origins.length > 1 ? { signatures: origins.map((_, i) => `${call}-${h}-${i}`) } : {}),
	});
	const forward = (h) => {
		const { start } = stage.get(h);
		stage.set(h, { start, at: "forward" });
		const client = start.headers.filter(([name]) => !/^(host|x-request-id|x-lectern-.*)$/i.test(name));
		return { kind: "subrequest", handle: h, method: start.method, url: origins[0] + start.path + (start.query ? "?" + start.query : ""),
			forward: true, retry: retryOf(start.method), ...signed("fwd", h, [...client, ["X-Request-Id", `req-${h}`]]) };
	};
	const script = (fn, msg) => {
		if (fn === "configure") {
			rec.configure = msg;
			origins = msg.origins ? msg.origins.split(",") : [msg.origin];
			return { kind: "configured" };
		}
		if (fn === "start") {
			rec.starts.push(msg);
			const h = ++n;
			stage.set(h, { start: msg, at: "start" });
			let out;
			if (answer) {
				out = { kind: "response", handle: h, status: 204, headers: [["X-Request-Id", `req-${h}`]] };
			} else if (gate) {
				stage.set(h, { start: msg, at: "gate" });
				out = { kind: "subrequest", handle: h, method: "POST", url: origins[0] + "/internal/gate", forward: false, retry: "unsent",
					...signed("gate", h, [["X-Request-Id", `req-${h}`], ["X-Lectern-Target", msg.path]]) };
			} else {
				out = forward(h);
			}
			if (background) {
				out.background = { handle: 1000 + h, method: bgMethod, url: origins[0] + "/internal/lease", retry: retryOf(bgMethod),
					...(bgMethod === "POST" ? { body: `{"n":${h}}` } : {}),
					...signed("bg", h, [["Content-Type", "application/json"], ["X-Request-Id", `bg-${h}`]]) };
			}
			return out;
		}
		// resume
		if (msg.handle >= 1000) {
			rec.bgResumes.push(msg);
			return { kind: "done", handle: msg.handle };
		}
		const st = stage.get(msg.handle);
		if (st.at === "gate") return forward(msg.handle); // the gate's answer is not read: the request is forwarded
		if (msg.status === 0) {
			return { kind: "response", handle: msg.handle, status: 500, headers: [["Content-Type", "application/json"]],
				body: JSON.stringify({ error: { code: "INTERNAL", message: msg.error, requestId: `req-${msg.handle}` } }) };
		}
		return { kind: "response", handle: msg.handle, status: msg.status, headers: msg.headers, passthrough: true };
	};
	return { rec, module: new Scripted(script) };
}

const env = (origins) => ({ ORIGIN_URL: origins, JWKS_URL: "http://127.0.0.1:1/jwks", ISSUER: "http://idp.test", AUDIENCE: "lectern-api",
	LECTERN_SECRET: SECRET, PUBLIC_URL: "http://edge.test" });

/**
 * A fresh isolate of module (a Scripted or the real WebAssembly.Module) in
 * front of ORIGIN_URL origins. send(method, body, headers) answers {status,
 * origin, json, headers}, once the background work it started is done.
 */
async function edge(module, origins) {
	globalThis.__lecternWasm = module;
	const worker = await loadWorker(workerPath, wasmPath);
	const e = env(origins);
	const waits = [];
	const ctx = { waitUntil: (p) => waits.push(p) };
	return async (method, body = null, headers = {}) => {
		const init = { method, headers, duplex: "half" };
		if (body !== null) init.body = body;
		const r = await worker.fetch(new Request(`http://edge.test${FORWARDED}`, init), e, ctx);
		const text = await r.text();
		await Promise.allSettled(waits.splice(0));
		let json = {};
		try {
			json = JSON.parse(text);
		} catch {}
		return { status: r.status, origin: json.origin, json, headers: r.headers };
	};
}

/** A client's body as a stream of size bytes (byte i is i % 251) in chunks of chunk bytes, counting what was pulled. */
function streamBody(size, chunk) {
	const s = { pulled: 0, cancelled: false };
	s.bytes = Uint8Array.from({ length: size }, (_, i) => i % 251);
	s.stream = new ReadableStream({
		pull(c) {
			if (s.pulled >= size) return c.close();
			const part = s.bytes.slice(s.pulled, Math.min(size, s.pulled + chunk));
			s.pulled += part.length;
			c.enqueue(part);
		},
		cancel() {
			s.cancelled = true;
		},
	}, { highWaterMark: 0 });
	return s;
}

const sigs = (o) => o.got.map((r) => r.all("x-lectern-edge").join(" | "));
/** Whether every request o got carried the signature of its call for o's index only. */
const ownSignatures = (o, index) => o.got.length > 0 && o.got.every((r) => {
	const v = r.all("x-lectern-edge");
	return v.length === 1 && new RegExp(`^(fwd|gate|bg)-\\d+-${index}$`).test(v[0]) && r.all("x-request-id").length === 1 &&
		v[0].split("-")[1] === /(\d+)$/.exec(r.header("x-request-id"))[1];
});

// ---------------------------------------------------------------------------
// Part 1: the scripted module.

// (f) configure carries "origins" only with several.
{
	const a = await origin("a"), b = await origin("b");
	const two = scripted();
	await (await edge(two.module, ` ${a.url}/ , ${b.url}//`))("GET");
	const c2 = two.rec.configure;
	check(c2?.origin === a.url && c2?.origins === `${a.url},${b.url}`, `configure, two origins: origin ${c2?.origin}, origins ${JSON.stringify(c2?.origins)}`);
	const one = scripted();
	await (await edge(one.module, `${a.url}/`))("GET");
	const c1 = one.rec.configure;
	check(c1?.origin === a.url && !("origins" in c1), `configure, one origin: no "origins" member (${JSON.stringify(c1?.origins)})`);
}

// (a), (b) Two live origins: every forward, gate call and background call
// an origin receives carries that origin's signature, and only it.
{
	const a = await origin("a"), b = await origin("b");
	const m = scripted({ gate: true, background: true });
	const send = await edge(m.module, `${a.url},${b.url}`);
	const rs = [];
	for (let i = 0; i < 8; i++) rs.push(await send(i % 2 ? "GET" : "POST", i % 2 ? null : `{"i":${i}}`));
	const kinds = (o) => ["fwd", "gate", "bg"].map((k) => o.got.filter((r) => r.header("x-lectern-edge")?.startsWith(k + "-")).length);
	check(rs.every((r) => r.status === 200), `two origins, 8 requests (gate, forward, background): 200 (${rs.map((r) => r.status)})`);
	check(ownSignatures(a, 0) && ownSignatures(b, 1), `each origin got its own signatures only (a: ${sigs(a).join(",")}; b: ${sigs(b).join(",")})`);
	check(kinds(a).every((k) => k > 0) && kinds(b).every((k) => k > 0),
		`both origins took forwards, gate calls and background calls (a ${kinds(a)}, b ${kinds(b)})`);
	const bgs = [...a.got, ...b.got].filter((r) => r.header("x-request-id")?.startsWith("bg-"));
	check(bgs.length === 8 && bgs.every((r) => r.method === "POST" && r.body.toString() === `{"n":${r.header("x-request-id").slice(3)}}`) &&
		m.rec.bgResumes.length === 8 && m.rec.bgResumes.every((r) => r.status === 200),
	`background calls: 8 POSTs with their bodies, each resumed with 200 (${bgs.length}, resumes ${m.rec.bgResumes.map((r) => r.status)})`);
}

// (a) Failover: an origin that resets after reading the request, then a
// live one. A GET and a PUT whose body came as an unsized stream (which
// the host used to stream, and never send twice) are sent on, each
// attempt with the signature of the origin it went to and the same body.
for (const [method, size] of [["GET", 0], ["PUT", 3000], ["DELETE", 0]]) {
	const a = await origin("a", { reset: true }), b = await origin("b");
	const m = scripted();
	const send = await edge(m.module, `${a.url},${b.url}`);
	const rs = [];
	for (let i = 0; i < 2; i++) rs.push(await send(method, size ? streamBody(size, 1000).stream : null)); // round robin: one tries a first
	const failedOver = a.got.length === 1 && b.got.length === 2 && rs.every((r) => r.status === 200 && r.origin === "b");
	const n = a.got[0]?.header("x-request-id");
	const again = b.got.find((r) => r.header("x-request-id") === n);
	const sameBody = again && a.got[0].body.equals(again.body) && again.body.length === size &&
		(size === 0 || again.header("content-length") === String(size));
	check(failedOver && ownSignatures(a, 0) && ownSignatures(b, 1) && sameBody,
		`failover, ${method}${size ? ` with a ${size}-byte streamed body` : ""}: the resetting origin got ${sigs(a)}, the next ${again ? again.all("x-lectern-edge") : "nothing"}` +
		` (${rs.map((r) => `${r.status}:${r.origin}`)}; a ${a.got.length}, b ${b.got.length}${size ? `, body ${again?.body.length} bytes, Content-Length ${again?.header("content-length")}` : ""})`);
}

// (b) A background call that fails over carries each origin's signature
// on each attempt. The module's are POSTs, never sent twice by the worker;
// a GET one shows the rule on the same path. The requests are answered by
// the module, so that the background calls alone take the origins in
// turn: one of the two tries the resetting origin first.
{
	const a = await origin("a", { reset: true }), b = await origin("b");
	const m = scripted({ background: true, bgMethod: "GET", answer: true });
	const send = await edge(m.module, `${a.url},${b.url}`);
	for (let i = 0; i < 2; i++) await send("GET");
	const aBg = a.got.filter((r) => r.header("x-request-id")?.startsWith("bg-"));
	const bBg = b.got.filter((r) => r.header("x-request-id")?.startsWith("bg-"));
	const retried = aBg.filter((r) => bBg.some((s) => s.header("x-request-id") === r.header("x-request-id")));
	check(retried.length === 1 && ownSignatures(a, 0) && ownSignatures(b, 1) && m.rec.bgResumes.every((r) => r.status === 200),
		`failover of a background call: the resetting origin got ${aBg.map((r) => r.header("x-lectern-edge"))}, the next ${bBg.map((r) => r.header("x-lectern-edge"))}` +
		` (resumes ${m.rec.bgResumes.map((r) => r.status)})`);
}

// One origin: the output has no signatures; the headers go as they are.
{
	const a = await origin("a");
	const m = scripted({ gate: true, background: true });
	const send = await edge(m.module, a.url);
	const rs = [await send("GET"), await send("POST", "{}")];
	check(rs.every((r) => r.status === 200) && a.got.length === 6 && ownSignatures(a, 0),
		`one origin: the module's X-Lectern-Edge as it is (${sigs(a).join(",")})`);
}

// (c), (e) bodySha256 is the SHA-256 of the body, which the forward sends
// whole, with its Content-Length; none for a GET or an empty body.
{
	const a = await origin("a"), b = await origin("b");
	const m = scripted();
	const send = await edge(m.module, `${a.url},${b.url}`);
	const last = () => [...a.got, ...b.got].find((r) => r.header("x-request-id") === `req-${m.rec.starts.length}`); // the latest forward
	const cases = [
		["POST", '{"mediaIds":["m1","é"]}', { "content-type": "application/json" }],
		["PUT", new Uint8Array([0, 1, 2, 255, 254]), {}],
		["POST", streamBody(5000, 700).stream, {}], // unsized: chunked from the client
	];
	for (const [method, body, headers] of cases) {
		const bytes = typeof body === "string" ? Buffer.from(body) : body instanceof Uint8Array ? Buffer.from(body) : Buffer.from(streamBody(5000, 700).bytes);
		const r = await send(method, body, headers);
		const start = m.rec.starts.at(-1);
		const fwd = last();
		const what = typeof body === "string" ? "a string body" : body instanceof Uint8Array ? "a binary body" : "a streamed body";
		check(r.status === 200 && start.bodySha256 === sha256(bytes),
			`${method} with ${what}: start carries bodySha256 ${start.bodySha256?.slice(0, 16)}…, the SHA-256 of the ${bytes.length} bytes`);
		check(fwd && fwd.body.equals(bytes) && fwd.all("content-length").join() === String(bytes.length) && fwd.all("transfer-encoding").length === 0,
			`${method} with ${what}: forwarded as those ${bytes.length} bytes, Content-Length ${fwd?.all("content-length")} (got ${fwd?.body.length})`);
	}
	const g = await send("GET");
	const gs = m.rec.starts.at(-1);
	check(g.status === 200 && (gs.bodySha256 ?? "") === "", `GET: no bodySha256 (${JSON.stringify(gs.bodySha256)})`);
	const e = await send("POST", "", { "content-length": "0" });
	const es = m.rec.starts.at(-1);
	const efwd = last();
	check(e.status === 200 && (es.bodySha256 ?? "") === "" && efwd?.method === "POST" && efwd.body.length === 0 && (efwd.header("content-length") ?? "0") === "0",
		`POST with an empty body: no bodySha256 (${JSON.stringify(es.bodySha256)}), nothing forwarded (Content-Length ${efwd?.header("content-length")})`);
}

// (d) A body over param.MaxBody: the host reads and forwards its first
// 65,537 bytes, hashed, with that Content-Length, and leaves the rest of
// the stream unread. The limit itself and one byte less pass whole.
{
	const a = await origin("a");
	const m = scripted();
	const send = await edge(m.module, a.url);
	for (const [what, size, chunk] of [["100 KB streamed in 1 KB chunks", 100 * 1024, 1024], ["100 KB in one chunk", 100 * 1024, 100 * 1024],
		["65,537 bytes", MAX, 4096], ["65,536 bytes", MAX - 1, 4096]]) {
		const s = streamBody(size, chunk);
		const r = await send("POST", s.stream, { "content-length": String(size) });
		const want = Buffer.from(s.bytes.subarray(0, Math.min(size, MAX)));
		const fwd = a.got.find((q) => q.header("x-request-id") === `req-${m.rec.starts.length}`);
		const start = m.rec.starts.at(-1);
		check(r.status === 200 && start.bodySha256 === sha256(want) && fwd?.body.equals(want) && fwd.all("content-length").join() === String(want.length),
			`${what}: ${want.length} bytes hashed and forwarded, Content-Length ${fwd?.all("content-length")} (got ${fwd?.body.length}; ${r.status})`);
		if (size > MAX && chunk < size) {
			check(s.pulled < size, `${what}: the rest of the stream is not read (${s.pulled} of ${size} bytes pulled${s.cancelled ? ", cancelled" : ""})`);
		}
	}
}

// A body whose stream fails: 400 BAD_REQUEST in the API's error body,
// from the host, before the module sees the request.
{
	const a = await origin("a");
	const m = scripted();
	const send = await edge(m.module, a.url);
	let sent = false;
	const body = new ReadableStream({
		pull(c) {
			if (!sent) {
				sent = true;
				c.enqueue(new Uint8Array(100));
			} else c.error(new Error("connection lost"));
		},
	});
	const r = await send("POST", body);
	const err = r.json.error ?? {};
	check(r.status === 400 && err.code === "BAD_REQUEST" && typeof err.message === "string" && err.requestId &&
		r.headers.get("x-request-id") === err.requestId && Object.keys(r.json).join() === "error" && Object.keys(err).sort().join() === "code,message,requestId",
	`a body that cannot be read: 400 ${err.code} (${JSON.stringify(r.json)})`);
	check(m.rec.starts.length === 0 && a.got.length === 0, `a body that cannot be read: no start, nothing forwarded (${m.rec.starts.length} starts, origin got ${a.got.length})`);
}

// ---------------------------------------------------------------------------
// Part 2: the real module, behind origins that verify the signatures.

const EMPTY_BODY = sha256("");
const keyOf = (purpose) => crypto.createHmac("sha256", SECRET).update(`lectern/gate/${purpose}`).digest(); // subkey.Derive(secret, subkey.Edge+"/"+purpose)
/** Whether req (an origin's record) carries a valid forward signature for host (default: the one it reached) over the body it got. */
function verifies(req, host = req.origin.host) {
	const v = req.all("x-lectern-edge");
	const m = v.length === 1 && /^v3=([1-9][0-9]{0,14})\.([0-9a-f]{16})\.([a-z0-9;-]+)\.([0-9a-f]{64})$/.exec(v[0]);
	if (!m) return false;
	const [, ms, nonce, names, mac] = m;
	if (Math.abs(Number(ms) - Date.now()) > 30_000) return false;
	// Every field a forward must sign (edgesig.Signed), listed.
	const list = names.split(";");
	for (const f of ["accept-encoding", "authorization", "content-type", "if-match", "if-none-match", "if-range", "range", "x-lectern-usage", "x-request-id"]) {
		if (!list.includes(f)) return false;
	}
	const field = (s) => `${Buffer.byteLength(s)}:${s}`;
	const msg = [field("v3"), field("forward"), field(req.method), field(host.toLowerCase()), field(req.target),
		field(req.body.length ? sha256(req.body) : EMPTY_BODY), field(names),
		...list.map((f) => field(req.all(f).join(", "))), field(nonce), field(ms)].join("");
	return crypto.createHmac("sha256", keyOf("forward")).update(msg).digest("hex") === mac;
}

const real = new WebAssembly.Module(fs.readFileSync(wasmPath));

// The verifier itself: a signature checks for its own host and body only.
{
	const a = await origin("a");
	const send = await edge(real, a.url);
	const r = await send("POST", '{"x":1}');
	const got = a.got[0];
	const tampered = got && { ...got, body: Buffer.from('{"x":2}') };
	check(r.status === 200 && got && verifies(got) && !verifies(got, "127.0.0.1:1") && !verifies(tampered),
		`real module, one origin: its forward verifies for the origin's host and body, not for another host or body`);
}

// Two origins: every forward verifies at the origin that received it.
{
	const a = await origin("a"), b = await origin("b");
	const send = await edge(real, `${a.url},${b.url}`);
	const rs = [];
	const big = Buffer.alloc(100 * 1024, 7);
	for (let i = 0; i < 9; i++) {
		const [method, body] = [["GET", null], ["POST", `{"n":${i}}`], ["PUT", big]][i % 3];
		rs.push(await send(method, body, body === null ? {} : { "content-length": String(body.length) }));
	}
	const all = [...a.got, ...b.got];
	const cut = all.filter((r) => r.method === "PUT");
	check(rs.every((r) => r.status === 200) && a.got.length > 0 && b.got.length > 0 && all.every((r) => verifies(r)),
		`real module, two origins: ${all.length} forwards (GET, POST, 100 KB PUT), each verified by the origin it reached (a ${a.got.length}, b ${b.got.length}; ${rs.map((r) => r.status)})`);
	check(cut.length === 3 && cut.every((r) => r.body.length === MAX && r.header("content-length") === String(MAX)),
		`real module: a 100 KB body forwarded as ${cut.map((r) => r.body.length)} bytes`);
}

// Failover: both attempts verify, each at its own origin.
for (const [method, body] of [["GET", null], ["PUT", '{"score":80}']]) {
	const a = await origin("a", { reset: true }), b = await origin("b");
	const send = await edge(real, `${a.url},${b.url}`);
	const rs = [];
	for (let i = 0; i < 2; i++) rs.push(await send(method, body));
	check(a.got.length === 1 && b.got.length === 2 && rs.every((r) => r.status === 200) && [...a.got, ...b.got].every((r) => verifies(r)),
		`real module, failover of a ${method}${body ? " with a body" : ""}: the resetting origin's attempt and the next one's each verify at their origin (a ${a.got.length}, b ${b.got.length})`);
}

// A dead origin listed first: the GETs that fail over verify at the live one.
{
	const dead = await deadOrigin(), b = await origin("b");
	const send = await edge(real, `${dead},${b.url}`);
	const rs = [];
	for (let i = 0; i < 4; i++) rs.push(await send("GET"));
	check(rs.every((r) => r.status === 200) && b.got.length === 4 && b.got.every((r) => verifies(r)),
		`real module, a dead origin listed first: 4 GETs verified at the live one (${rs.map((r) => r.status)})`);
}

for (const s of servers) s.close();
cleanUp();
process.exit();
