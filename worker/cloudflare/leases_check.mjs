// The LEASES var of worker.mjs (docs/edge.md, "Leases"), checked in plain
// Node with the real module: "on", "off" or unset configure the module
// (a request is answered), any other value is a configuration error
// (500 INTERNAL, "The edge is not configured correctly."). The leased 304
// itself is smoke.sh's, in workerd against a real origin. smoke.sh runs it:
//
//   node worker/cloudflare/leases_check.mjs <worker.mjs> <worker.wasm>
import { cleanUp, loadWorker } from "./node_load.mjs";

const [workerPath, wasmPath] = process.argv.slice(2);
const check = (ok, what) => {
	console.log(`${ok ? "PASS" : "FAIL"} ${what}`);
	if (!ok) process.exitCode = 1;
};

async function answer(leases) {
	const worker = await loadWorker(workerPath, wasmPath);
	const env = { ORIGIN_URL: "http://127.0.0.1:1", JWKS_URL: "http://127.0.0.1:1/jwks", ISSUER: "http://idp.test",
		AUDIENCE: "lectern-api", LECTERN_SECRET: "0123456789abcdef0123456789abcdef", PUBLIC_URL: "http://edge.test" };
	if (leases !== undefined) env.LEASES = leases;
	const r = await worker.fetch(new Request("http://edge.test/v1/teachers"), env, { waitUntil: () => {} });
	const text = await r.text();
	return { status: r.status, text };
}

for (const leases of [undefined, "on", "off"]) {
	const r = await answer(leases);
	check(r.status === 404 && r.text.includes("NOT_FOUND"), `LEASES ${JSON.stringify(leases)}: configured (${r.status})`);
}
for (const leases of ["yes", "ON", "true"]) {
	const r = await answer(leases);
	check(r.status === 500 && r.text.includes("not configured correctly"), `LEASES ${JSON.stringify(leases)}: refused (${r.status})`);
}
cleanUp();
process.exit();
