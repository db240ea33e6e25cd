// The background JWKS refresh of worker.mjs (docs/edge.md), checked in
// plain Node: workerd's clock cannot be moved past the JWKS max age, so
// this runs worker.mjs's fetch handler with a moved Date.now, the real
// module, a JWKS server that can hold its answer and an origin that
// answers 200. smoke.sh runs it:
//
//   node worker/cloudflare/refresh_check.mjs <worker.mjs> <worker.wasm>
//
// It prints PASS/FAIL lines and exits non-zero on a failure.
import http from "node:http";
import crypto from "node:crypto";
import { cleanUp, loadWorker } from "./node_load.mjs";

const [workerPath, wasmPath] = process.argv.slice(2);
let offset = 0;
const realNow = Date.now;
Date.now = () => realNow() + offset;
const warnings = [];
const warn = console.warn;
console.warn = (...a) => {
	warnings.push(a.join(" "));
	warn(...a);
};

const keys = { k1: crypto.generateKeyPairSync("ed25519"), k2: crypto.generateKeyPairSync("ed25519") };
const jwk = (kid) => ({ ...keys[kid].publicKey.export({ format: "jwk" }), kid, alg: "EdDSA", use: "sig" });
let served = ["k1"], fetches = 0, hold = null, held = [];
const b64 = (x) => Buffer.from(typeof x === "string" ? x : JSON.stringify(x)).toString("base64url");
const ISS = "http://idp.test", AUD = "lectern-api";
function sign(kid, jti) {
	const iat = Math.floor(Date.now() / 1000);
	const h = b64({ alg: "EdDSA", typ: "JWT", kid });
	const p = b64({ iss: ISS, aud: AUD, sub: "c1", client_id: "c1", org: "acme", scope: "service-api/content.read", iat, nbf: iat, exp: iat + 900, jti });
	const sig = crypto.sign(null, Buffer.from(`${h}.${p}`), keys[kid].privateKey).toString("base64url");
	return `${h}.${p}.${sig}`;
}
const jwks = http.createServer((req, res) => {
	fetches++;
	const answer = () => { res.setHeader("content-type", "application/json"); res.end(JSON.stringify({ keys: served.map(jwk) })); };
	if (hold) { held.push(res); hold.then(answer); } else answer();
});
const origin = http.createServer((req, res) => { res.setHeader("content-type", "application/json"); res.end('{"ok":true}'); });
await new Promise((r) => jwks.listen(0, "127.0.0.1", r));
await new Promise((r) => origin.listen(0, "127.0.0.1", r));
const env = { ORIGIN_URL: `http://127.0.0.1:${origin.address().port}`, JWKS_URL: `http://127.0.0.1:${jwks.address().port}/jwks`,
	ISSUER: ISS, AUDIENCE: AUD, LECTERN_SECRET: "0123456789abcdef0123456789abcdef", PUBLIC_URL: "http://edge.test" };
const worker = await loadWorker(workerPath, wasmPath);
const waits = [];
const ctx = { waitUntil: (p) => waits.push(p) };
const get = (tok) => worker.fetch(new Request("http://edge.test/v1/tiers", { headers: { authorization: `Bearer ${tok}` } }), env, ctx);
const check = (ok, what) => { console.log(`${ok ? "PASS" : "FAIL"} ${what}`); if (!ok) process.exitCode = 1; };

let r = await get(sign("k1", "a"));
check(r.status === 200 && fetches === 1, `first request 200 after 1 fetch (${r.status}, ${fetches})`);
offset = 3660_000; // past token.DefaultMaxAge
let release; hold = new Promise((res) => (release = res));
r = await get(sign("k1", "b"));
check(r.status === 200 && fetches === 2 && held.length === 1 && !held[0].writableEnded, `stale set: 200 while the JWKS fetch is held (${r.status}, fetches ${fetches})`);
const parked = get(sign("k2", "c")); // a kid the stale set lacks: parks on the refresh
served = ["k1", "k2"];
hold = null; release();
r = await parked;
check(r.status === 200, `a k2 token parked on the refresh, woken by its done: ${r.status}`);
await Promise.all(waits);
check(warnings.length === 0, `no warnings (${warnings.join("; ")})`);
offset += 60_000;
r = await get(sign("k2", "d"));
check(r.status === 200 && fetches === 2, `after the refresh: 200 with no further fetch (${r.status}, ${fetches})`);
jwks.close();
origin.close();
cleanUp();
process.exit();
