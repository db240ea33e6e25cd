// Lectern's edge on Cloudflare Workers: the host for the edge module
// (build/worker.wasm, a WASI preview 1 reactor; ABI in docs/edge.md).
//
// The module is instantiated once per isolate, lazily on the first request,
// and configured once from the worker's vars and secret (wrangler.toml).
// Every request is a small state machine driven by the module's outputs:
// `response` ends it, `subrequest` is performed with fetch() and answered
// with `resume`, `park` waits until another request's output names it in
// `wake`. An output carrying `refresh` also asks for the JWKS in the
// background (ctx.waitUntil): its resume answers `done`, which only wakes.
// With leases on (var LEASES, on by default; docs/edge.md, "Leases") an
// output may carry `background`, a lease request or usage report of the
// module's own, performed the same way. This host keeps no usage log and
// takes no revoke push (revoke ""): docs/edge.md says what that bounds.
// Each call into the module is synchronous, so calls from requests that
// interleave at awaits never overlap, which is what the ABI needs.
//
// The client's body is read before the module sees the request, at most
// MAX_FORWARD_BODY bytes: the start message carries its SHA-256
// (bodySha256), which the signature of the forward covers, and a forward
// sends exactly those bytes (readBody below).
//
// ORIGIN_URL may list several origins, comma-separated (docs/edge.md,
// "Several origins"): the module is configured with the first ("origin")
// and the whole list ("origins"), and every subrequest under the first
// goes to one of them, round robin, trying the next when fetch() throws
// and the request can be sent again (Origins below). The signature
// (X-Lectern-Edge) names the receiving host, so the module signs each
// call to the origin once per origin ("signatures", in the list's order)
// and each attempt carries the one of the origin it is sent to.

import wasmModule from "../../build/worker.wasm";

const enc = new TextEncoder();
const dec = new TextDecoder();

// WASI errno values (wasi_snapshot_preview1).
const ESUCCESS = 0;
const EBADF = 8;
const EINVAL = 28;
const ENOSYS = 52;

// Non-forward subrequests (JWKS, gate) are small; one that hangs would
// hold parked requests, so it is bounded. Forwards are not (the origin
// streams exports).
const SUBREQUEST_TIMEOUT_MS = 10_000;

// A parked request waits for a wake; if none comes (it always should:
// the fetching request answers within SUBREQUEST_TIMEOUT_MS) it resumes
// anyway after the guest's own in-flight limit (token.DefaultInFlightTimeout,
// 30 s) has passed, and the guest decides.
const PARK_TIMEOUT_MS = 35_000;

// A request takes a handful of steps (JWKS, gate, forward); a guest that
// asks for more is looping.
const MAX_STEPS = 32;

// Several origins. An origin whose fetch threw is tried after the others
// for ORIGIN_BACKOFF_MS, so that a down origin costs one failed request per
// few seconds, not every other one.
const ORIGIN_BACKOFF_MS = 5_000;

// The most of a client's body the host reads and forwards: param.MaxBody
// (64 KiB, more than any route takes) and one byte more, which the origin
// answers as too large exactly as it would a larger body. The rest of the
// stream is never read. Being in memory, the body of a forward the module
// marks "retry": "any" can always be sent again to another origin.
const MAX_FORWARD_BODY = 64 * 1024 + 1;

// The signature header (shared/edgesig.Header): the module's outputs
// carry the value for the first origin in their headers, and, with
// several origins, one per origin in "signatures".
const SIGNATURE_HEADER = "x-lectern-edge";

// What may be sent to another origin is the module's mark on each output
// ("retry", docs/edge.md): "any" (an idempotent method) after any failed
// attempt, "unsent" only after an attempt that never left. workerd's
// fetch() throws the same "Network connection lost." for a refused
// connection and for one lost after the request was sent, so the worker
// cannot tell an unsent attempt: it fails over only what is marked "any",
// and a POST (the gate call, which meters; the media mint) is never sent
// twice.
const RETRY_ANY = "any";

/**
 * parseOrigins reads ORIGIN_URL: one base URL or several, comma-separated,
 * each http or https without query or fragment (a trailing slash dropped),
 * none twice. The same rules as LECTERN_ORIGIN_URL (worker/wazero.ParseOrigins).
 */
function parseOrigins(value) {
	const out = [];
	for (const entry of String(value).split(",")) {
		const base = entry.trim().replace(/\/+$/, "");
		if (base === "") throw new Error(`ORIGIN_URL ${JSON.stringify(value)} has an empty entry`);
		let u;
		try {
			u = new URL(base);
		} catch {
			u = null;
		}
		if (!u || (u.protocol !== "http:" && u.protocol !== "https:") || u.search || u.hash || u.username || u.password) {
			throw new Error(`ORIGIN_URL: ${JSON.stringify(base)} is not an http or https base URL`);
		}
		if (out.includes(base)) throw new Error(`ORIGIN_URL: ${JSON.stringify(base)} is listed twice`);
		out.push(base);
	}
	return out;
}

/** The origins of one isolate: their order for each subrequest, and which are in backoff. */
class Origins {
	constructor(list) {
		this.base = list[0]; // the module's: every forward and gate URL is under it
		// index: the origin's place in ORIGIN_URL, and in an output's signatures
		this.list = list.map((base, index) => ({ base, index, downUntil: 0 }));
		// Isolates start at different origins, so that they do not all
		// send their first requests to the first.
		this.next = Math.floor(Math.random() * list.length);
	}

	/**
	 * The URLs to try for url, in order: for a URL under the base, with
	 * several origins, one per origin, the next in round robin first and
	 * those in backoff last; any other URL (the identity provider's JWKS)
	 * alone, as it is.
	 */
	route(url) {
		const rest = url.startsWith(this.base) ? url.slice(this.base.length) : null;
		if (this.list.length < 2 || rest === null || (rest !== "" && rest[0] !== "/" && rest[0] !== "?")) {
			return [{ url, origin: null }];
		}
		const n = this.list.length;
		const first = this.next;
		this.next = (this.next + 1) % n;
		const now = Date.now();
		const up = [];
		const down = [];
		for (let i = 0; i < n; i++) {
			const origin = this.list[(first + i) % n];
			(origin.downUntil > now ? down : up).push({ url: origin.base + rest, origin });
		}
		return up.concat(down);
	}

	failed(origin) {
		if (origin) origin.downUntil = Date.now() + ORIGIN_BACKOFF_MS;
	}
}

/**
 * fetchOrigin is fetch(url, init) for a URL that may be under the origin
 * base: origin after origin while fetch() throws, if the output's retry
 * mark is "any" (the body, if any, is in memory and sent again); never
 * once init.signal has aborted (the subrequest timeout bounds all
 * attempts together). With signatures (an output's, several origins),
 * each attempt carries as X-Lectern-Edge the entry of the origin it goes
 * to; without, init.headers as they are. A forward (forward set) marked
 * "any" that an origin answers 503 (it could not serve it now, a bundle
 * store without room: nothing applied) goes on to the next origin too, as
 * the wazero host's does; the last origin's 503 is the answer.
 */
async function fetchOrigin(origins, url, init, retry, signatures, forward = false) {
	const repeatable = retry === RETRY_ANY;
	const targets = origins.route(url);
	for (let i = 0; ; i++) {
		const { url: target, origin } = targets[i];
		try {
			const resp = await fetch(target, { ...init, headers: signedFor(init.headers, origin, signatures) });
			if (forward && repeatable && resp.status === 503 && i + 1 < targets.length && !init.signal?.aborted) {
				await resp.body?.cancel();
				console.warn(`[edge host] ${init.method} ${target} answered 503; trying the next origin`);
				continue;
			}
			return resp;
		} catch (err) {
			if (init.signal?.aborted) throw err;
			origins.failed(origin);
			if (!repeatable || i + 1 >= targets.length) throw err;
			console.warn(`[edge host] ${init.method} ${target} failed (${errorText(err)}); trying the next origin`);
		}
	}
}

/**
 * signedFor is headers (pairs) for an attempt to origin (null: a URL not
 * under the origin base, or one origin): X-Lectern-Edge replaced with
 * signatures[origin.index] when the output has that entry.
 */
function signedFor(headers, origin, signatures) {
	if (!origin || !Array.isArray(signatures) || typeof signatures[origin.index] !== "string") return headers;
	const out = headers.filter(([name]) => name.toLowerCase() !== SIGNATURE_HEADER);
	out.push(["X-Lectern-Edge", signatures[origin.index]]);
	return out;
}

/** alloc refused a message (over the module's limit, 1 MiB). */
class TooLarge extends Error {}

/** Thrown by proc_exit: the instance is finished and must not be reused. */
class WasiExit extends Error {
	constructor(code) {
		super(`edge module exited with code ${code}`);
		this.code = code;
	}
}

// ---------------------------------------------------------------------------
// WASI preview 1, the few functions a reactor uses.

function wasiImports(getMemory) {
	const view = () => new DataView(getMemory().buffer);
	const bytes = (ptr, len) => new Uint8Array(getMemory().buffer, ptr >>> 0, len >>> 0);

	// Lines written to stdout/stderr go to the worker's log, one console
	// call per line (wrangler tail / wrangler dev show them).
	const pending = { 1: "", 2: "" };
	const emit = (fd, text) => {
		let s = pending[fd] + text;
		let nl;
		while ((nl = s.indexOf("\n")) >= 0) {
			const line = s.slice(0, nl);
			(fd === 2 ? console.error : console.log)(`[edge] ${line}`);
			s = s.slice(nl + 1);
		}
		pending[fd] = s.length > 4096 ? ((fd === 2 ? console.error : console.log)(`[edge] ${s}`), "") : s;
	};

	let lastMono = 0n;
	const impl = {
		clock_time_get(id, _precision, resultPtr) {
			let ns;
			if (id === 0) {
				// realtime
				ns = BigInt(Date.now()) * 1_000_000n;
			} else if (id === 1 || id === 2 || id === 3) {
				// monotonic (and the cputime clocks, which nothing here needs exactly)
				ns = BigInt(Math.floor(performance.now() * 1e6));
				if (ns < lastMono) ns = lastMono;
				lastMono = ns;
			} else {
				return EINVAL;
			}
			view().setBigUint64(resultPtr >>> 0, ns, true);
			return ESUCCESS;
		},
		clock_res_get(id, resultPtr) {
			if (id < 0 || id > 3) return EINVAL;
			view().setBigUint64(resultPtr >>> 0, 1_000_000n, true); // workerd's clocks move in ms
			return ESUCCESS;
		},
		random_get(ptr, len) {
			// getRandomValues fills at most 65536 bytes per call.
			for (let off = 0; off < len; off += 65536) {
				crypto.getRandomValues(bytes(ptr + off, Math.min(65536, len - off)));
			}
			return ESUCCESS;
		},
		fd_write(fd, iovs, iovsLen, nwrittenPtr) {
			if (fd !== 1 && fd !== 2) return EBADF;
			const dv = view();
			let n = 0;
			let text = "";
			for (let i = 0; i < iovsLen; i++) {
				const base = dv.getUint32(iovs + i * 8, true);
				const len = dv.getUint32(iovs + i * 8 + 4, true);
				text += dec.decode(bytes(base, len), { stream: false });
				n += len;
			}
			emit(fd, text);
			view().setUint32(nwrittenPtr >>> 0, n, true);
			return ESUCCESS;
		},
		args_sizes_get(argcPtr, bufSizePtr) {
			const dv = view();
			dv.setUint32(argcPtr >>> 0, 0, true);
			dv.setUint32(bufSizePtr >>> 0, 0, true);
			return ESUCCESS;
		},
		args_get() {
			return ESUCCESS;
		},
		environ_sizes_get(countPtr, bufSizePtr) {
			const dv = view();
			dv.setUint32(countPtr >>> 0, 0, true);
			dv.setUint32(bufSizePtr >>> 0, 0, true);
			return ESUCCESS;
		},
		environ_get() {
			return ESUCCESS;
		},
		proc_exit(code) {
			throw new WasiExit(code);
		},
		// No preopened directories: Go's runtime walks fd 3, 4, ... until
		// EBADF and panics on any other error, so ENOSYS would kill it.
		fd_prestat_get() {
			return EBADF;
		},
		fd_prestat_dir_name() {
			return EBADF;
		},
		sched_yield() {
			return ESUCCESS;
		},
	};
	return impl;
}

/**
 * The import object for mod: every import it declares, the WASI ones
 * above implemented and anything else a stub answering ENOSYS (logged on
 * first use, so a new import shows up in the worker's log).
 */
function buildImports(mod, getMemory) {
	const wasi = wasiImports(getMemory);
	const imports = {};
	for (const { module, name, kind } of WebAssembly.Module.imports(mod)) {
		if (kind !== "function") {
			throw new Error(`edge module imports ${kind} ${module}.${name}; only functions are provided`);
		}
		const ns = (imports[module] ??= {});
		if (module === "wasi_snapshot_preview1" && wasi[name]) {
			ns[name] = wasi[name];
		} else {
			let logged = false;
			ns[name] = () => {
				if (!logged) {
					logged = true;
					console.log(`[edge host] ${module}.${name} is not provided; answering ENOSYS (logged once)`);
				}
				return ENOSYS;
			};
		}
	}
	return imports;
}

// ---------------------------------------------------------------------------
// The instance: one per isolate, created on the first request.

let instancePromise = null;

function getInstance(env) {
	instancePromise ??= instantiate(env).catch((err) => {
		instancePromise = null; // the next request tries again
		throw err;
	});
	return instancePromise;
}

async function instantiate(env) {
	const t0 = performance.now();
	const d0 = Date.now();
	let memory = null;
	const imports = buildImports(wasmModule, () => memory);
	const instance = await WebAssembly.instantiate(wasmModule, imports);
	memory = instance.exports.memory;
	for (const name of ["memory", "alloc", "configure", "start", "resume"]) {
		if (!(name in instance.exports)) throw new Error(`edge module does not export ${name}`);
	}
	instance.exports._initialize?.();
	const t1 = performance.now();
	const d1 = Date.now();
	const guest = new Guest(instance);
	const { config, origins } = configFrom(env);
	guest.origins = new Origins(origins);
	const out = guest.call("configure", config);
	if (!out || out.kind !== "configured") {
		throw new Error(`edge module refused its configuration: ${out?.error ?? JSON.stringify(out)}`);
	}
	const t2 = performance.now();
	console.log(
		`[edge host] module instantiated in ${(t1 - t0).toFixed(2)} ms (Date delta ${d1 - d0} ms), ` +
			`configured in ${(t2 - t1).toFixed(2)} ms; imports: ${WebAssembly.Module.imports(wasmModule)
				.map((i) => i.name)
				.join(",")}`,
	);
	return guest;
}

/** The secrets the worker needs: never vars (wrangler.toml), put with `wrangler secret put`, or in .dev.vars for `wrangler dev`. */
const SECRETS = ["LECTERN_SECRET"];

/**
 * missingConfig names what env lacks, and how to set it: a var is
 * wrangler.toml's; a secret is .dev.vars' under `wrangler dev` (which
 * reads no secret of the account) and `wrangler secret put`'s when
 * deployed. "" when nothing is missing.
 */
function missingConfig(env) {
	const vars = ["ORIGIN_URL", "JWKS_URL", "ISSUER", "AUDIENCE", "PUBLIC_URL"].filter((k) => !env[k]);
	const secrets = SECRETS.filter((k) => !env[k]);
	const parts = [];
	if (secrets.length) {
		parts.push(
			`the secret ${secrets.join(", ")} is not set: for wrangler dev put ${secrets.map((k) => `${k}=<the origins' ${k}>`).join(", ")} ` +
				`in .dev.vars beside wrangler.toml; deployed, run \`wrangler secret put ${secrets[0]}\``,
		);
	}
	if (vars.length) parts.push(`${vars.join(", ")} not set (wrangler.toml's [vars])`);
	return parts.length ? `worker is missing configuration: ${parts.join("; ")}` : "";
}

function configFrom(env) {
	const missing = missingConfig(env);
	if (missing) throw new Error(missing);
	const origins = parseOrigins(env.ORIGIN_URL);
	const config = {
		origin: origins[0],
		jwksUrl: env.JWKS_URL,
		issuer: env.ISSUER,
		audience: env.AUDIENCE,
		secret: env.LECTERN_SECRET,
		// The API's public base URL is set once, as PUBLIC_URL (the
		// origin's LECTERN_PUBLIC_URL has the same value); every 401
		// challenge names its protected-resource metadata.
		resourceMetadata: env.PUBLIC_URL.replace(/\/+$/, "") + "/.well-known/oauth-protected-resource",
		// The keys of the signed download links, the origin's
		// LECTERN_URL_KEYS (a secret); unset, the key derived from the secret.
		urlKeys: env.LECTERN_URL_KEYS ?? "",
		// During a rotation of LECTERN_SECRET, the other secret (a secret
		// binding too, the origins' LECTERN_SECRET_ACCEPT): links of the
		// key derived from it still verify; nothing is signed with it.
		secretAccept: env.LECTERN_SECRET_ACCEPT ?? "",
		leases: leasesFrom(env.LEASES),
		// LECTERN_EDGE_SIGN_V2 = "1": sign by the previous release's rule
		// (v2) while origins of that release serve; only during a rolling
		// upgrade (docs/upgrading.md). Unset: v3.
		signV2: env.LECTERN_EDGE_SIGN_V2 === "1",
		// An isolate has no address the origin could push a revocation to:
		// the origin waits for its leases to expire instead.
		revoke: "",
		// No reportEvery: the module's default, a usage report at 16
		// unreported uses or 1 s. With no usage log, that is what bounds
		// the 304s an isolate that dies takes unbilled with it.
	};
	// With several origins the module signs each call to the origin for
	// each of them (the signature names the receiving host): the list, in
	// the host's order, origin first. One origin: no member, as before.
	if (origins.length > 1) config.origins = origins.join(",");
	return { config, origins }; // origins: the host's (Origins)
}

/** The LEASES var: "on" (or unset) or "off". */
function leasesFrom(value) {
	if (value === undefined || value === "" || value === "on") return true;
	if (value === "off") return false;
	throw new Error(`LEASES ${JSON.stringify(value)}: want on or off (see wrangler.toml)`);
}

/** The instance and the ABI's calls: JSON in through alloc, JSON out. */
class Guest {
	constructor(instance) {
		this.x = instance.exports;
		this.broken = null; // the error that made the instance unusable
		this.parked = new Map(); // handle -> {resolve, reject}
		this.origins = null; // Origins, set once configured
	}

	call(fn, msg) {
		if (this.broken) throw this.broken;
		const input = enc.encode(JSON.stringify(msg));
		let ptr;
		try {
			ptr = this.x.alloc(input.length) >>> 0;
		} catch (err) {
			this.retire(err);
			throw err;
		}
		if (ptr === 0) throw new TooLarge(`message of ${input.length} bytes refused by the edge module`);
		try {
			// alloc may have grown memory: take the buffer after it.
			new Uint8Array(this.x.memory.buffer, ptr, input.length).set(input);
			const r = BigInt.asUintN(64, this.x[fn](ptr, input.length));
			const outPtr = Number(r >> 32n);
			const outLen = Number(r & 0xffffffffn);
			// and after the call, for the same reason; decode copies out.
			const text = dec.decode(new Uint8Array(this.x.memory.buffer, outPtr, outLen));
			return JSON.parse(text);
		} catch (err) {
			// A trap or proc_exit leaves the instance's state unknown: retire
			// it, fail the requests parked on it, let the next request start
			// a fresh one.
			this.retire(err);
			throw err;
		}
	}

	retire(err) {
		if (this.broken) return;
		this.broken = err;
		if (instancePromise) {
			instancePromise.then((g) => {
				if (g === this) instancePromise = null;
			}, () => {});
		}
		for (const { reject } of this.parked.values()) reject(err);
		this.parked.clear();
		console.error(`[edge host] instance retired: ${err && err.stack ? err.stack : err}`);
	}

	/**
	 * Resolves when an output's `wake` names handle (or after
	 * PARK_TIMEOUT_MS). The wake comes from another request's call, and
	 * workerd cancels a request as hung when it awaits only a promise
	 * another request resolves: a timer of its own keeps it alive (workerd
	 * then runs the continuation in this request's context).
	 */
	async park(handle) {
		if (this.broken) throw this.broken;
		if (this.parked.has(handle)) throw new Error(`handle ${handle} parked twice`);
		let keepAlive, timeout;
		const woken = new Promise((resolve, reject) => this.parked.set(handle, { resolve, reject }));
		const expired = new Promise((resolve) => {
			timeout = setTimeout(resolve, PARK_TIMEOUT_MS);
		});
		keepAlive = setInterval(() => {}, 1000);
		try {
			await Promise.race([woken, expired]);
		} finally {
			clearInterval(keepAlive);
			clearTimeout(timeout);
			if (this.parked.get(handle)) {
				console.warn(`[edge host] handle ${handle} not woken after ${PARK_TIMEOUT_MS} ms; resuming it`);
				this.parked.delete(handle);
			}
		}
	}

	wake(handles) {
		for (const h of handles) {
			const p = this.parked.get(h);
			if (!p) {
				console.warn(`[edge host] wake names handle ${h}, which is not parked`);
				continue;
			}
			this.parked.delete(h);
			p.resolve();
		}
	}
}

// ---------------------------------------------------------------------------
// Requests.

const NULL_BODY_STATUS = new Set([101, 204, 205, 304]);

/** The start message; bodySha256 when the request has a body (readBody's), which the forward's signature covers. */
async function startMessage(request, body) {
	const url = new URL(request.url);
	const msg = {
		method: request.method,
		path: url.pathname, // escaped, as the URL parser leaves it
		query: url.search.length > 1 ? url.search.slice(1) : "",
		headers: clientHeaders(request),
		now: Date.now(),
	};
	if (body) msg.bodySha256 = hex(await crypto.subtle.digest("SHA-256", body));
	return msg;
}

function hex(buffer) {
	return Array.from(new Uint8Array(buffer), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** The client's body stream failed (the client went away, a malformed chunked body). */
class ClientBodyError extends Error {}

/**
 * readBody reads the client's body before the module sees the request:
 * at most MAX_FORWARD_BODY bytes, the rest of the stream left unread. It
 * returns those bytes, which a forward sends, or null when there are none
 * (GET, HEAD, an empty body). A failed stream throws ClientBodyError.
 *
 * It reads a clone's body (a tee), leaving the request's own untouched:
 * workerd does not drain a request body the worker read in part and then
 * cancelled or released, and under wrangler dev (4.86.0) the next request
 * on that connection then waited 30 s and more; nor can the worker drain
 * it itself once the response is sent ("Can't read from request stream
 * after response has been sent."). An untouched body workerd disposes of
 * after the response, as it always did when the module answered a request
 * with a body itself. The tee holds for the untouched side what the clone
 * read, at most MAX_FORWARD_BODY bytes and a chunk.
 */
async function readBody(request) {
	if (request.method === "GET" || request.method === "HEAD" || request.body === null) return null;
	const reader = request.clone().body.getReader();
	const chunks = [];
	let n = 0;
	try {
		while (n < MAX_FORWARD_BODY) {
			const { done, value } = await reader.read();
			if (done) break;
			const chunk = value.byteLength > MAX_FORWARD_BODY - n ? value.subarray(0, MAX_FORWARD_BODY - n) : value;
			chunks.push(chunk);
			n += chunk.byteLength;
		}
	} catch (err) {
		throw new ClientBodyError(errorText(err));
	}
	if (n >= MAX_FORWARD_BODY) reader.cancel().catch(() => {});
	else reader.releaseLock();
	if (n === 0) return null;
	if (chunks.length === 1) return chunks[0];
	const body = new Uint8Array(n);
	let off = 0;
	for (const c of chunks) {
		body.set(c, off);
		off += c.byteLength;
	}
	return body;
}

/**
 * The headers of a forward: the module's, but the framing is the host's
 * (the body it read, whose length fetch() sends as Content-Length), so
 * the client's Content-Length and Transfer-Encoding are left out. The
 * module sends no Host: fetch() sets it from the URL, the origin's, which
 * is the host the signature names.
 */
function forwardHeaders(headers) {
	return headers.filter(([name]) => {
		const n = name.toLowerCase();
		return n !== "content-length" && n !== "transfer-encoding";
	});
}

/**
 * The client's headers as it sent them. Cloudflare (and wrangler dev)
 * replace Accept-Encoding with "br, gzip" and keep the client's value in
 * request.cf.clientAcceptEncoding; the origin negotiates the encoding (and
 * its ETag and Vary) on the client's own, as in direct mode, so it is put
 * back. The runtime passes the origin's encoded body through as is.
 */
function clientHeaders(request) {
	const original = request.cf?.clientAcceptEncoding;
	if (typeof original !== "string") return [...request.headers];
	const out = [];
	for (const [name, value] of request.headers) {
		if (name !== "accept-encoding") out.push([name, value]);
	}
	if (original !== "") out.push(["accept-encoding", original]);
	return out;
}

function headerPairs(headers) {
	return [...headers];
}

/**
 * The request id of an answer the host writes itself: "edge_" and 24
 * lowercase hex digits, as the Go host's (hostErrorId in
 * shared/testdata/edge-messages.txt; messages_check.mjs holds it to it).
 */
function hostRequestId() {
	return "edge_" + hex(crypto.getRandomValues(new Uint8Array(12)));
}

/** The host's own error, in the API's error body. */
function hostError(status, message, code = "INTERNAL") {
	const requestId = hostRequestId();
	const body = JSON.stringify({ error: { code, message, requestId } });
	return new Response(body, {
		status,
		headers: { "Content-Type": "application/json", "X-Request-Id": requestId, "Cache-Control": "no-store" },
	});
}

/**
 * fetchForGuest performs sub, a subrequest the guest reads the body of
 * (the JWKS, the gate, a background lease or usage call: the module's
 * output or its "background", {handle, method, url, headers, body,
 * signatures, retry}), bounded by SUBREQUEST_TIMEOUT_MS, each attempt
 * signed for its origin and failed over as its retry mark allows
 * (fetchOrigin), and returns the resume message for it: status 0 with the
 * error when it failed.
 */
async function fetchForGuest(origins, sub) {
	const msg = { handle: sub.handle };
	try {
		const init = {
			method: sub.method,
			headers: sub.headers ?? [],
			redirect: "manual",
			signal: AbortSignal.timeout(SUBREQUEST_TIMEOUT_MS),
		};
		if (sub.body) init.body = sub.body; // a background POST's (lease, usage)
		const resp = await fetchOrigin(origins, sub.url, init, sub.retry, sub.signatures);
		msg.status = resp.status;
		msg.headers = headerPairs(resp.headers);
		msg.body = await resp.text();
	} catch (err) {
		msg.status = 0;
		msg.headers = [];
		msg.error = errorText(err);
	}
	msg.now = Date.now();
	return msg;
}

/** resumeWith resumes the guest with msg; a message too large for it is answered as a failed subrequest. */
function resumeWith(call, msg, what) {
	try {
		return call("resume", msg);
	} catch (err) {
		if (!(err instanceof TooLarge)) throw err;
		return call("resume", {
			handle: msg.handle,
			status: 0,
			headers: [],
			error: `${what} response too large for the edge module`,
			now: Date.now(),
		});
	}
}

function errorText(err) {
	return String(err && err.message ? err.message : err);
}

/**
 * Fetches the JWKS of an output's `refresh` in the background, outliving
 * the response (ctx.waitUntil), and resumes the module's background handle
 * with the answer; no request waits for it. The `done` output may wake
 * requests parked on the fetch, and may ask for another refresh.
 */
function refreshInBackground(guest, refresh, ctx) {
	const task = (async () => {
		const msg = await fetchForGuest(guest.origins, { ...refresh, method: "GET", headers: [["Accept", "application/json"]] });
		const out = resumeWith((name, m) => guest.call(name, m), msg, "JWKS");
		if (Array.isArray(out.wake) && out.wake.length) guest.wake(out.wake);
		inBackground(guest, out, ctx);
		if (out.kind !== "done") {
			console.warn(`[edge host] background JWKS refresh answered ${JSON.stringify(out).slice(0, 300)}`);
		}
	})();
	ctx.waitUntil(
		task.catch((err) => console.error(`[edge host] background JWKS refresh failed: ${err && err.stack ? err.stack : err}`)),
	);
}

/**
 * Performs an output's `background` subrequest (a lease request, a usage
 * report), outliving the response (ctx.waitUntil), signed for the origin
 * it goes to (its `signatures`), and resumes its handle with the answer;
 * no request waits for it. The `done` it answers may ask for more
 * background work. An isolate that dies first loses it: the module's
 * reports are cumulative, so the next one carries what it held.
 */
function backgroundInBackground(guest, bg, ctx) {
	const task = (async () => {
		const msg = await fetchForGuest(guest.origins, bg);
		const out = resumeWith((name, m) => guest.call(name, m), msg, "background");
		if (Array.isArray(out.wake) && out.wake.length) guest.wake(out.wake);
		inBackground(guest, out, ctx);
		if (out.kind !== "done") {
			console.warn(`[edge host] background subrequest answered ${JSON.stringify(out).slice(0, 300)}`);
		}
	})();
	ctx.waitUntil(
		task.catch((err) => console.error(`[edge host] background subrequest failed: ${err && err.stack ? err.stack : err}`)),
	);
}

/** Starts the background work an output asks for: a JWKS refresh, a lease call. */
function inBackground(guest, out, ctx) {
	if (!out) return;
	if (out.refresh) refreshInBackground(guest, out.refresh, ctx);
	if (out.background) backgroundInBackground(guest, out.background, ctx);
}

async function drive(guest, request, ctx) {
	// Every call into the module, with the background work its output
	// may ask for.
	const call = (fn, msg) => {
		const out = guest.call(fn, msg);
		inBackground(guest, out, ctx);
		return out;
	};
	// The body first: the start message carries its hash.
	let body;
	try {
		body = await readBody(request);
	} catch (err) {
		if (!(err instanceof ClientBodyError)) throw err;
		return hostError(400, "The request body could not be read; nothing was done. Send the request again.", "BAD_REQUEST");
	}
	const start = await startMessage(request, body);
	let out;
	try {
		out = call("start", start);
	} catch (err) {
		if (!(err instanceof TooLarge)) throw err;
		return hostError(400, "The request's headers are too large.", "BAD_REQUEST");
	}
	let forwarded = null; // the origin's response to the forward, for passthrough
	for (let step = 0; step < MAX_STEPS; step++) {
		if (Array.isArray(out.wake) && out.wake.length) guest.wake(out.wake);
		switch (out.kind) {
			case "response": {
				if (out.passthrough) {
					if (!forwarded) throw new Error("passthrough response without a forward");
					return new Response(NULL_BODY_STATUS.has(forwarded.status) ? null : forwarded.body, {
						status: forwarded.status,
						headers: out.headers ?? [],
					});
				}
				if (forwarded && forwarded.body) forwarded.body.cancel().catch(() => {});
				const body = NULL_BODY_STATUS.has(out.status) || request.method === "HEAD" ? null : (out.body ?? null);
				return new Response(body, { status: out.status, headers: out.headers ?? [] });
			}
			case "subrequest": {
				let msg;
				if (out.forward) {
					msg = { handle: out.handle };
					try {
						// The body read before start, whose hash the
						// signatures cover; in memory, so a forward marked
						// "retry": "any" may be sent again to another origin.
						const init = {
							method: out.method,
							headers: forwardHeaders(out.headers ?? []),
							body: out.method === "GET" || out.method === "HEAD" ? null : body,
							redirect: "manual",
						};
						const resp = await fetchOrigin(guest.origins, out.url, init, out.retry, out.signatures, true);
						forwarded = resp;
						msg.status = resp.status;
						msg.headers = headerPairs(resp.headers);
					} catch (err) {
						msg.status = 0;
						msg.headers = [];
						msg.error = errorText(err);
					}
					msg.now = Date.now();
				} else {
					msg = await fetchForGuest(guest.origins, out);
				}
				// A response too large for the guest still answers the
				// subrequest, so the guest (and anyone parked on it) moves on.
				out = resumeWith(call, msg, "subrequest");
				break;
			}
			case "park": {
				await guest.park(out.handle);
				out = call("resume", { handle: out.handle, wake: true, now: Date.now() });
				break;
			}
			case "error":
				// The module could not read our message: a host bug.
				throw new Error(`edge module refused a message: ${out.error}`);
			default:
				throw new Error(`edge module answered an unknown output kind ${JSON.stringify(out.kind)}`);
		}
	}
	throw new Error(`edge module took more than ${MAX_STEPS} steps on one request`);
}

/** HEALTH_PATH answers GET and HEAD 200 {"status":"ok","version":RELEASE} once the module runs, without a token, as the Go host's does (which adds its commit: this host has none). */
const HEALTH_PATH = "/healthz";

/** RELEASE is Lectern's release, internal/version.Release (CHANGELOG.md); a Go test (TestWorkerStatesTheRelease) holds the two equal. */
const RELEASE = "0.5.0-dev";

export default {
	async fetch(request, env, ctx) {
		let guest;
		try {
			guest = await getInstance(env);
		} catch (err) {
			// The cause names what to set; the client learns only that
			// the edge is not configured.
			const missing = missingConfig(env);
			console.error(`[edge host] cannot start the edge module: ${missing || (err && err.stack ? err.stack : err)}`);
			return hostError(500, "The edge is not configured correctly.");
		}
		if (new URL(request.url).pathname === HEALTH_PATH && (request.method === "GET" || request.method === "HEAD")) {
			return new Response(request.method === "HEAD" ? null : JSON.stringify({ status: "ok", version: RELEASE }) + "\n", {
				status: 200,
				headers: { "Content-Type": "application/json", "Cache-Control": "no-store" },
			});
		}
		// The guest keeps state per handle and peers may be parked on this
		// request's JWKS fetch: drive it to its end even if the client goes
		// away (the runtime cancels a request's tasks on disconnect).
		const done = drive(guest, request, ctx);
		ctx.waitUntil(done.catch(() => {}));
		try {
			return await done;
		} catch (err) {
			console.error(`[edge host] request failed: ${err && err.stack ? err.stack : err}`);
			return hostError(500, "The edge failed to process the request.");
		}
	},
};
