// Download links in worker.mjs (docs/edge.md, "Download links"), checked
// in plain Node with the real module: LECTERN_URL_KEYS reaches the module
// (a link of that key is forwarded, one of another key refused), and
// without it the key derived from LECTERN_SECRET is the one. smoke.sh
// runs it:
//
//   node worker/cloudflare/files_check.mjs <worker.mjs> <worker.wasm>
//
// The links are signed here with node:crypto, independently of
// shared/link, from its documented form. It prints PASS/FAIL lines and
// exits non-zero on a failure.
import crypto from "node:crypto";
import http from "node:http";
import { cleanUp, loadWorker } from "./node_load.mjs";

const [workerPath, wasmPath] = process.argv.slice(2);
const check = (ok, what) => {
	console.log(`${ok ? "PASS" : "FAIL"} ${what}`);
	if (!ok) process.exitCode = 1;
};
const SECRET = "0123456789abcdef0123456789abcdef";
const URL_KEY = "cf-url-key-0123456789abcdef0123456789";

/** A media link of organisation acme (generation gen-1) signed with secret under kid, expiring at exp (unix s): shared/link's form. */
function mediaLink(kid, secret, exp, media) {
	const field = (s) => `${Buffer.byteLength(s)}:${s}`;
	const msg = ["lectern-link-v2", "m", kid, String(exp), "1", "asset", "acme", "gen-1", media].map(field).join("");
	const sig = crypto.createHmac("sha256", secret).update(msg).digest("base64url");
	return `/files/m/asset?k=${kid}&x=${exp}&r=1&o=acme&g=gen-1&m=${encodeURIComponent(media)}&s=${sig}`;
}
const derived = crypto.createHmac("sha256", SECRET).update("lectern/links").digest(); // subkey.Derive(secret, "links")

const origin = { got: 0 };
const srv = http.createServer((req, res) => {
	origin.got++;
	res.setHeader("content-type", "application/octet-stream");
	res.end(req.method === "HEAD" ? undefined : "asset bytes");
});
origin.url = await new Promise((r) => srv.listen(0, "127.0.0.1", () => r(`http://127.0.0.1:${srv.address().port}`)));

async function edge(extra) {
	const worker = await loadWorker(workerPath, wasmPath);
	const env = { ORIGIN_URL: origin.url, JWKS_URL: "http://127.0.0.1:1/jwks", ISSUER: "http://idp.test", AUDIENCE: "lectern-api",
		LECTERN_SECRET: SECRET, PUBLIC_URL: "http://edge.test", ...extra };
	const ctx = { waitUntil: () => {} };
	return async (method, target) => {
		const r = await worker.fetch(new Request(`http://edge.test${target}`, { method }), env, ctx);
		const text = await r.text();
		let code;
		try {
			code = JSON.parse(text).error?.code;
		} catch {}
		return { status: r.status, text, code, allow: r.headers.get("allow") };
	};
}

const now = () => Math.floor(Date.now() / 1000);
const media = "high/algebra/1#c1#video";
{
	const send = await edge({ LECTERN_URL_KEYS: `cf=${URL_KEY}` });
	const good = mediaLink("cf", URL_KEY, now() + 60, media);
	let r = await send("GET", good);
	check(r.status === 200 && r.text === "asset bytes" && origin.got === 1, `a link of LECTERN_URL_KEYS's key: forwarded (${r.status}, origin got ${origin.got})`);
	r = await send("HEAD", good);
	check(r.status === 200 && r.text === "" && origin.got === 2, `HEAD: forwarded (${r.status})`);
	const refused = async (what, method, target, status, code, word) => {
		const before = origin.got;
		const r = await send(method, target);
		check(r.status === status && r.code === code && r.text.includes(word) && origin.got === before,
			`${what}: ${status} ${code} from the edge, no forward (${r.status} ${r.code}, origin got ${origin.got - before})`);
		return r;
	};
	await refused("altered", "GET", good.replace("&r=1&", "&r=2&"), 404, "NOT_FOUND", "not valid");
	await refused("expired", "GET", mediaLink("cf", URL_KEY, now() - 1, media), 404, "NOT_FOUND", "expired");
	await refused("the derived key, LECTERN_URL_KEYS set", "GET", mediaLink("s", derived, now() + 60, media), 404, "NOT_FOUND", "not valid");
	const r405 = await refused("POST", "POST", good, 405, "METHOD_NOT_ALLOWED", "GET or HEAD");
	check(r405.allow === "GET, HEAD", `POST: Allow ${r405.allow}`);
}
{
	const send = await edge({});
	const before = origin.got;
	const r = await send("GET", mediaLink("s", derived, now() + 60, media));
	check(r.status === 200 && origin.got === before + 1, `no LECTERN_URL_KEYS: a link of the key derived from LECTERN_SECRET is forwarded (${r.status})`);
}

srv.close();
cleanUp();
process.exit();
