// /healthz and a missing secret in worker.mjs, checked in plain Node with
// the real module. GET and HEAD /healthz answer 200 {"status":"ok",
// "version":<the release>} without a token, as the Go host's do (other
// methods reach the module); a worker without LECTERN_SECRET (`wrangler
// dev` with no .dev.vars) answers 500 "not configured correctly" and logs
// a line naming the secret and .dev.vars. smoke.sh runs it:
//
//   node worker/cloudflare/health_check.mjs <worker.mjs> <worker.wasm>
import { cleanUp, loadWorker } from "./node_load.mjs";

const [workerPath, wasmPath] = process.argv.slice(2);
const check = (ok, what) => {
	console.log(`${ok ? "PASS" : "FAIL"} ${what}`);
	if (!ok) process.exitCode = 1;
};
const ENV = { ORIGIN_URL: "http://127.0.0.1:1", JWKS_URL: "http://127.0.0.1:1/jwks", ISSUER: "http://idp.test",
	AUDIENCE: "lectern-api", LECTERN_SECRET: "0123456789abcdef0123456789abcdef", PUBLIC_URL: "http://edge.test" };

async function answer(env, method, path) {
	const worker = await loadWorker(workerPath, wasmPath);
	const logged = [];
	const error = console.error;
	console.error = (...args) => logged.push(args.join(" "));
	try {
		const r = await worker.fetch(new Request("http://edge.test" + path, { method }), env, { waitUntil: () => {} });
		return { status: r.status, text: await r.text(), type: r.headers.get("Content-Type"), logged: logged.join("\n") };
	} finally {
		console.error = error;
	}
}

let r = await answer(ENV, "GET", "/healthz");
check(r.status === 200 && JSON.parse(r.text).status === "ok" && /^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/.test(JSON.parse(r.text).version) &&
	r.type === "application/json", `GET /healthz: ${r.status} ${r.text.trim()}`);
r = await answer(ENV, "HEAD", "/healthz");
check(r.status === 200 && r.text === "", `HEAD /healthz: ${r.status}`);
r = await answer(ENV, "POST", "/healthz");
check(r.status !== 200, `POST /healthz reaches the module: ${r.status}`);

const { LECTERN_SECRET, ...noSecret } = ENV;
r = await answer(noSecret, "GET", "/v1/tiers");
check(r.status === 500 && r.text.includes("not configured correctly") && !r.text.includes("LECTERN_SECRET"),
	`no LECTERN_SECRET: ${r.status}, nothing of the configuration told the client`);
check(r.logged.includes("LECTERN_SECRET") && r.logged.includes(".dev.vars") && r.logged.includes("wrangler secret put"),
	`no LECTERN_SECRET: the log names it, .dev.vars and wrangler secret put: ${r.logged}`);
r = await answer(noSecret, "GET", "/healthz");
check(r.status === 500, `no LECTERN_SECRET: /healthz ${r.status}, not 200`);
const { ISSUER, ...noIssuer } = ENV;
r = await answer(noIssuer, "GET", "/v1/tiers");
check(r.status === 500 && r.logged.includes("ISSUER") && r.logged.includes("[vars]") && !r.logged.includes("LECTERN_SECRET"),
	`no ISSUER: the log names the var: ${r.logged}`);
cleanUp();
process.exit();
