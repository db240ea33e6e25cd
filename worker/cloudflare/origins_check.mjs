// Several origins in worker.mjs (docs/edge.md, "Several origins"), checked
// in plain Node with the real module: ORIGIN_URL lists a dead origin (a
// closed port), live ones that count what they receive, and one that
// resets every connection after reading the request. smoke.sh runs it:
//
//   node worker/cloudflare/origins_check.mjs <worker.mjs> <worker.wasm>
//
// Each case loads a fresh copy of the worker (a new isolate). It prints
// PASS/FAIL lines and exits non-zero on a failure.
import http from "node:http";
import net from "node:net";
import { cleanUp, loadWorker } from "./node_load.mjs";

const [workerPath, wasmPath] = process.argv.slice(2);
const FORWARDED = "/.well-known/oauth-protected-resource"; // forwarded without a token, any method
const warnings = [];
const warn = console.warn;
console.warn = (...a) => {
	warnings.push(a.join(" "));
	warn(...a);
};
const check = (ok, what) => {
	console.log(`${ok ? "PASS" : "FAIL"} ${what}`);
	if (!ok) process.exitCode = 1;
};
const listen = (srv) => new Promise((r) => srv.listen(0, "127.0.0.1", () => r(`http://127.0.0.1:${srv.address().port}`)));
const servers = [];

/** An origin answering 200 {"origin": name, "received": <body bytes>}, counting requests. */
async function liveOrigin(name) {
	const o = { name, got: 0 };
	const srv = http.createServer((req, res) => {
		let n = 0;
		req.on("data", (c) => (n += c.length));
		req.on("end", () => {
			o.got++;
			res.setHeader("content-type", "application/json");
			res.end(JSON.stringify({ origin: name, received: n }));
		});
	});
	servers.push(srv);
	o.url = await listen(srv);
	return o;
}

/** An origin that reads each request whole, counts it and resets the connection unanswered. */
async function resetOrigin() {
	const o = { got: 0 };
	const srv = net.createServer((sock) => {
		let buf = Buffer.alloc(0);
		sock.on("data", (d) => {
			buf = Buffer.concat([buf, d]);
			const end = buf.indexOf("\r\n\r\n");
			if (end < 0) return;
			const m = /content-length: *(\d+)/i.exec(buf.subarray(0, end).toString());
			if (buf.length < end + 4 + (m ? Number(m[1]) : 0)) return;
			o.got++;
			sock.resetAndDestroy();
		});
		sock.on("error", () => {});
	});
	servers.push(srv);
	o.url = await listen(srv);
	return o;
}

/** The URL of a port nothing listens on. */
async function deadOrigin() {
	const srv = net.createServer();
	const url = await listen(srv);
	await new Promise((r) => srv.close(r));
	return url;
}

const env = (origins) => ({ ORIGIN_URL: origins, JWKS_URL: "http://127.0.0.1:1/jwks", ISSUER: "http://idp.test", AUDIENCE: "lectern-api",
	LECTERN_SECRET: "0123456789abcdef0123456789abcdef", PUBLIC_URL: "http://edge.test" });

/** A fresh isolate in front of origins; send(method, body) answers {status, origin, received, code}. */
async function edge(origins) {
	const worker = await loadWorker(workerPath, wasmPath);
	const e = env(origins);
	const waits = [];
	const ctx = { waitUntil: (p) => waits.push(p) };
	return async (method, body = null) => {
		// As a client's request arrives: a body with its Content-Length.
		const headers = body === null ? {} : { "content-length": String(Buffer.byteLength(body)) };
		const r = await worker.fetch(new Request(`http://edge.test${FORWARDED}`, { method, body, headers, duplex: "half" }), e, ctx);
		const j = await r.json().catch(() => ({}));
		return { status: r.status, origin: j.origin, received: j.received, code: j.error?.code };
	};
}

async function times(n, f) {
	const out = [];
	for (let i = 0; i < n; i++) out.push(await f(i));
	return out;
}
const statuses = (rs) => rs.map((r) => `${r.status}${r.origin ? ":" + r.origin : ""}`).join(",");

// Spreading: two live origins take turns.
{
	const a = await liveOrigin("a"), b = await liveOrigin("b");
	const send = await edge(`${a.url}, ${b.url}/`);
	const rs = await times(10, (i) => send(i % 2 ? "GET" : "POST", i % 2 ? null : "x".repeat(i)));
	const alternate = rs.every((r, i) => r.status === 200 && (i === 0 || r.origin !== rs[i - 1].origin));
	check(alternate && a.got === 5 && b.got === 5, `two origins: requests alternate (${statuses(rs)}; a ${a.got}, b ${b.got})`);
}

// Failover: with a dead origin listed, every GET succeeds through the
// live one, and the dead one, in its backoff after its first failure, is
// tried once (one warning), not every other request.
{
	const dead = await deadOrigin(), b = await liveOrigin("b");
	const send = await edge(`${dead},${b.url}`);
	warnings.length = 0;
	const rs = await times(12, () => send("GET"));
	check(rs.every((r) => r.status === 200 && r.origin === "b") && b.got === 12, `a dead origin listed: 12 GETs answered by the live one (${statuses(rs)})`);
	check(warnings.length === 1, `the dead origin tried once, then left in its backoff (${warnings.length} failovers)`);
	const posts = await times(4, (i) => send("POST", `{"n":${i}}`));
	check(posts.every((r) => r.status === 200 && r.origin === "b"), `POSTs then go to the live origin (${statuses(posts)})`);
}

// A POST is never sent to a second origin (workerd cannot tell a refused
// connection from one lost after sending): with a dead origin listed, a
// fresh isolate's POST that tries it first fails, 500 INTERNAL, and the
// dead origin is then skipped.
{
	const dead = await deadOrigin(), b = await liveOrigin("b");
	const send = await edge(`${dead},${b.url}`);
	const rs = await times(6, (i) => send("POST", `{"n":${i}}`));
	const failed = rs.filter((r) => r.status === 500 && r.code === "INTERNAL").length;
	check(failed === 1 && b.got === 5, `a dead origin listed: 1 of 6 POSTs fails, 500 INTERNAL, then the live origin takes them (${statuses(rs)})`);
}

// After sending: an origin that reads the request and resets the
// connection. A POST it received is not sent to the other origin; a GET
// and a PUT (its body, read before the module saw the request, sent
// again) are, and succeed. Each origin's own signature on each attempt is
// signatures_check.mjs's.
for (const [method, body, retried] of [["POST", '{"mediaIds":["m1"]}', false], ["POST", null, false], ["GET", null, true], ["PUT", '{"score":80}', true]]) {
	const a = await resetOrigin(), b = await liveOrigin("b");
	const send = await edge(`${a.url},${b.url}`);
	const rs = await times(2, () => send(method, body)); // round robin: one of the two tries a first
	const ok = rs.filter((r) => r.status === 200 && r.origin === "b" && r.received === (body ?? "").length).length;
	const want = retried ? ok === 2 && b.got === 2 : ok === 1 && b.got === 1 && rs.some((r) => r.status === 500 && r.code === "INTERNAL");
	check(a.got === 1 && want, `${method}${body ? " with a body" : ""} to an origin that resets after reading it: ${retried ? "sent on to the other" : "not sent on, 500"} (${statuses(rs)}; a ${a.got}, b ${b.got})`);
}

// An origin without room for a bundle answers 503 (nothing applied): a GET
// goes on to the other origin, a POST gets the 503; every origin full, the
// client gets the 503.
{
	const full = { got: 0 };
	const srv = http.createServer((req, res) => {
		req.resume();
		req.on("end", () => {
			full.got++;
			res.writeHead(503, { "content-type": "application/json", "retry-after": "10", "x-request-id": req.headers["x-request-id"] ?? "" });
			res.end(JSON.stringify({ error: { code: "INTERNAL", message: "no room", requestId: req.headers["x-request-id"] ?? "" } }));
		});
	});
	servers.push(srv);
	full.url = await listen(srv);
	const b = await liveOrigin("b");
	const send = await edge(`${full.url},${b.url}`);
	const gets = await times(4, () => send("GET"));
	check(gets.every((r) => r.status === 200 && r.origin === "b") && full.got >= 1,
		`an origin answering 503: GETs go on to the other (${statuses(gets)}; full ${full.got})`);
	const posts = await times(2, (i) => send("POST", `{"n":${i}}`));
	check(posts.some((r) => r.status === 503), `an origin answering 503: a POST it got is answered 503, not sent on (${statuses(posts)})`);
	const only = await edge(`${full.url},${full.url}/again`);
	const r = await only("GET");
	check(r.status === 503, `every origin answering 503: 503 (${r.status})`);
}

// One origin: as before several existed. Down, 500 INTERNAL on every
// request (no backoff to skip to); a bad list refuses to configure.
{
	const dead = await deadOrigin();
	const send = await edge(dead);
	const rs = await times(3, () => send("GET"));
	check(rs.every((r) => r.status === 500 && r.code === "INTERNAL"), `one origin, down: 500 INTERNAL (${statuses(rs)})`);
	const b = await liveOrigin("b");
	const one = await edge(b.url);
	const r = await one("GET");
	check(r.status === 200 && r.origin === "b", `one origin, up: 200 (${r.status})`);
	for (const bad of [`${b.url},`, `${b.url},${b.url}/`, "127.0.0.1:8080"]) {
		const r = await (await edge(bad))("GET");
		check(r.status === 500 && r.code === "INTERNAL" && b.got === 1, `ORIGIN_URL ${JSON.stringify(bad)} refused (${r.status})`);
	}
}

for (const s of servers) s.close();
cleanUp();
process.exit();
