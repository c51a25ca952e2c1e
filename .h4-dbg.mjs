// ../../tmp/h4scratch/svc2.mts
import { mkdtemp } from "node:fs/promises";
import { tmpdir as tmpdir2 } from "node:os";
import { join as join5 } from "node:path";

// src/drivers/process.ts
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join as join2 } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

// src/artifact/extract.ts
import { createHash, randomBytes } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { mkdir, rename, rm, stat } from "node:fs/promises";
import { Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createGunzip } from "node:zlib";
import { basename, dirname, join, resolve, sep } from "node:path";
import { get as httpGet } from "node:http";
import { get as httpsGet } from "node:https";
import tarStream from "tar-stream";

// src/errors.ts
var ExitCode = {
  ok: 0,
  /** Generic failure the user can act on (bad config, build error, validation). */
  user: 1,
  /** Wrong usage: unknown command or flag, missing argument. */
  usage: 2,
  /** The service answered with an error (4xx/5xx problem). */
  api: 3,
  /** The service could not be reached. */
  unreachable: 4,
  /** Interrupted by SIGINT/SIGTERM. */
  interrupted: 130,
  /** A bug in svc. */
  internal: 70
};
var SvcError = class extends Error {
  exitCode;
  constructor(message, exitCode, options) {
    super(message, options);
    this.name = new.target.name;
    this.exitCode = exitCode;
  }
};
var UserError = class extends SvcError {
  hint;
  problems;
  constructor(message, opts = {}) {
    super(message, opts.exitCode ?? ExitCode.user, { cause: opts.cause });
    this.hint = opts.hint;
    this.problems = opts.problems ?? [];
  }
};
var ApiError = class extends SvcError {
  status;
  problem;
  constructor(problem, opts = {}) {
    super(`${problem.status} ${problem.title}: ${problem.detail}`, ExitCode.api, opts);
    this.status = problem.status;
    this.problem = problem;
  }
};
var UnreachableError = class extends UserError {
  constructor(url, cause) {
    super(`Cannot reach the svc service at ${url}`, {
      hint: "Check SVC_API_URL, or start a service with `svc server` (or `svc dev` for local work).",
      exitCode: ExitCode.unreachable,
      cause
    });
  }
};
function errorMessage(err) {
  return err instanceof Error ? err.message : String(err);
}

// src/artifact/extract.ts
var DEFAULT_EXTRACT_LIMITS = {
  maxBytes: 4 * 1024 ** 3,
  maxEntries: 2e5,
  maxRatio: 200,
  ratioMinBytes: 16 * 1024 ** 2
};
var UnsafeArtifactError = class extends UserError {
  constructor(source, reason) {
    super(`Refusing artifact ${source}: ${reason}`, {
      hint: "Rebuild it with `svc build`; artifacts may hold only regular files and directories with relative paths."
    });
  }
};
function entryPath(name) {
  if (name.includes("\0")) return { refused: `entry name contains a NUL byte` };
  if (name.startsWith("/") || name.startsWith("\\") || /^[A-Za-z]:/.test(name)) {
    return { refused: `absolute path "${name}"` };
  }
  const segments = name.split(/[\\/]+/).filter((s) => s !== "" && s !== ".");
  if (segments.includes("..")) return { refused: `path "${name}" has a ".." segment` };
  return { path: segments.length === 0 ? null : segments.join("/") };
}
function safeMode(mode, type) {
  if (type === "directory") return 493;
  return (mode ?? 0) & 73 ? 493 : 420;
}
var ALLOWED_TYPES = /* @__PURE__ */ new Set(["file", "contiguous-file", "directory"]);
var ByteCounter = class extends Transform {
  bytes = 0;
  _transform(chunk, _enc, done) {
    this.bytes += chunk.length;
    done(null, chunk);
  }
};
async function extractLocal(source, destDir, limits) {
  const parent = dirname(resolve(destDir));
  await mkdir(parent, { recursive: true });
  const temp = join(parent, `.${basename(destDir)}.partial-${randomBytes(6).toString("hex")}`);
  await mkdir(temp, { mode: 493 });
  const root = resolve(temp);
  let files = 0;
  let bytes = 0;
  let entries = 0;
  const compressed = new ByteCounter();
  const extract = tarStream.extract();
  const refuse = (reason) => new UnsafeArtifactError(source, reason);
  const feeding = pipeline(createReadStream(source), compressed, createGunzip(), extract);
  let feedError;
  feeding.catch((err) => feedError = err);
  try {
    for await (const entry of extract) {
      const header = entry.header;
      if (++entries > limits.maxEntries) throw refuse(`more than ${limits.maxEntries} entries`);
      const type = header.type ?? "file";
      if (!ALLOWED_TYPES.has(type)) {
        throw refuse(`entry "${header.name}" is a ${type}${header.linkname ? ` (to "${header.linkname}")` : ""}; only files and directories are allowed`);
      }
      const checked = entryPath(header.name);
      if ("refused" in checked) throw refuse(checked.refused);
      if (checked.path === null) {
        entry.resume();
        continue;
      }
      const target = resolve(root, checked.path);
      if (!target.startsWith(root + sep)) throw refuse(`path "${header.name}" escapes the destination`);
      if (type === "directory") {
        await mkdir(target, { recursive: true, mode: 493 });
        entry.resume();
        continue;
      }
      if ((header.size ?? 0) + bytes > limits.maxBytes) {
        throw refuse(`more than ${limits.maxBytes} bytes uncompressed`);
      }
      await mkdir(dirname(target), { recursive: true, mode: 493 });
      const guard = new Transform({
        transform(chunk, _enc, done) {
          bytes += chunk.length;
          if (bytes > limits.maxBytes) return done(refuse(`more than ${limits.maxBytes} bytes uncompressed`));
          if (bytes >= limits.ratioMinBytes && bytes / Math.max(compressed.bytes, 1) > limits.maxRatio) {
            return done(refuse(`compression ratio above ${limits.maxRatio}:1 (a zip bomb?)`));
          }
          done(null, chunk);
        }
      });
      await pipeline(entry, guard, createWriteStream(target, { flags: "wx", mode: safeMode(header.mode, "file") }));
      files++;
    }
    await feeding;
    await rm(destDir, { recursive: true, force: true }).catch(() => void 0);
    await rename(temp, destDir);
    return { dir: resolve(destDir), files, bytes };
  } catch (err) {
    extract.destroy();
    await feeding.catch(() => void 0);
    await rm(temp, { recursive: true, force: true });
    const cause = feedError ?? err;
    if (err instanceof UnsafeArtifactError) throw err;
    if (cause instanceof UnsafeArtifactError) throw cause;
    const code = err.code;
    if (code === "EEXIST") throw refuse(`duplicate entry (${errorMessage(err)})`);
    if (code === "ENOENT" && !await stat(source).catch(() => null)) {
      throw new UserError(`Artifact not found: ${source}`, { hint: "Build it first with `svc build`." });
    }
    throw new UnsafeArtifactError(source, `not a valid .tar.gz (${errorMessage(cause)})`);
  }
}
function isUrl(source) {
  return /^https?:\/\//i.test(source);
}
async function downloadArtifact(url, file, token, maxBytes = DEFAULT_EXTRACT_LIMITS.maxBytes) {
  const get = url.toLowerCase().startsWith("https:") ? httpsGet : httpGet;
  const response = await new Promise((resolvePromise, reject) => {
    const req = get(url, { headers: token ? { authorization: `Bearer ${token}` } : {} }, resolvePromise);
    req.on("error", reject);
  });
  if (response.statusCode !== 200) {
    response.resume();
    throw new UserError(`Cannot download artifact ${url}: HTTP ${response.statusCode}`);
  }
  let received = 0;
  const limit = new Transform({
    transform(chunk, _enc, done) {
      received += chunk.length;
      if (received > maxBytes) return done(new UserError(`Artifact ${url} is larger than ${maxBytes} bytes`));
      done(null, chunk);
    }
  });
  try {
    await pipeline(response, limit, createWriteStream(file, { mode: 384 }));
  } catch (err) {
    await rm(file, { force: true });
    throw err;
  }
}
async function sha256File(file) {
  const hash = createHash("sha256");
  await pipeline(createReadStream(file), hash);
  return hash.digest("hex");
}
function limitsOf(options) {
  return {
    maxBytes: options.maxBytes ?? DEFAULT_EXTRACT_LIMITS.maxBytes,
    maxEntries: options.maxEntries ?? DEFAULT_EXTRACT_LIMITS.maxEntries,
    maxRatio: options.maxRatio ?? DEFAULT_EXTRACT_LIMITS.maxRatio,
    ratioMinBytes: options.ratioMinBytes ?? DEFAULT_EXTRACT_LIMITS.ratioMinBytes
  };
}
async function exists(path) {
  return await stat(path).catch(() => null) !== null;
}
async function extractArtifactCached(source, cacheDir, options = {}) {
  const limits = limitsOf(options);
  await mkdir(cacheDir, { recursive: true });
  let local = source;
  let downloaded;
  if (isUrl(source)) {
    downloaded = join(cacheDir, `.download-${randomBytes(6).toString("hex")}.tar.gz`);
    await downloadArtifact(source, downloaded, options.token, limits.maxBytes);
    local = downloaded;
  }
  try {
    const digest = await sha256File(local);
    const dir = join(cacheDir, digest);
    if (await exists(dir)) return dir;
    try {
      await extractIntoNew(local, dir, limits);
    } catch (err) {
      if (await exists(dir)) return dir;
      throw err;
    }
    return dir;
  } finally {
    if (downloaded) await rm(downloaded, { force: true });
  }
}
async function extractIntoNew(source, dir, limits) {
  const staging = `${dir}.staging-${randomBytes(6).toString("hex")}`;
  await extractLocal(source, staging, limits);
  try {
    await rename(staging, dir);
  } catch (err) {
    await rm(staging, { recursive: true, force: true });
    const code = err.code;
    if ((code === "ENOTEMPTY" || code === "EEXIST") && await exists(dir)) return;
    throw err;
  }
}

// src/drivers/process.ts
function defaultRuntimeEntry() {
  const candidates = [new URL("../runtime/worker.js", "file:///work/main/test/runtime/artifact.ts"), new URL("../../dist/runtime/worker.js", "file:///work/main/test/runtime/artifact.ts")];
  const found = candidates.map((u) => fileURLToPath(u)).find((file) => existsSync(file));
  return found ?? fileURLToPath(candidates[0]);
}
function workerEnvironment(launch, artifactDir, baseEnv, parentPid) {
  const env = {};
  for (const [key, value] of Object.entries(baseEnv)) {
    if (!key.startsWith("SVC_") && value !== void 0) env[key] = value;
  }
  Object.assign(env, launch.environment);
  const protocol = {
    SVC_API_URL: launch.apiUrl,
    SVC_WORKER_ID: launch.workerId,
    SVC_WORKER_TOKEN: launch.workerToken,
    SVC_ENDPOINT_ID: launch.endpointId,
    SVC_ENDPOINT_NAME: launch.endpointName,
    SVC_APP: launch.app,
    SVC_ENV: launch.env,
    SVC_API_KEY: launch.apiKey,
    SVC_ARTIFACT: launch.artifactPath,
    SVC_ARTIFACT_DIR: artifactDir,
    SVC_MAX_CONCURRENCY: String(launch.maxConcurrency),
    SVC_VOLUME_PATH: launch.volumePath,
    SVC_PARENT_PID: String(parentPid)
  };
  for (const [key, value] of Object.entries(protocol)) {
    if (value !== void 0 && value !== "") env[key] = value;
    else delete env[key];
  }
  return env;
}
function createProcessDriver(options = {}) {
  const entry = options.runtimeEntry ?? defaultRuntimeEntry();
  const cacheDir = options.cacheDir ?? join2(tmpdir(), "svc-artifact-cache");
  const children = /* @__PURE__ */ new Map();
  const extracted = /* @__PURE__ */ new Map();
  const killAll = () => {
    for (const { child } of children.values()) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  };
  process.on("exit", killAll);
  const artifactDir = (artifactPath) => {
    let pending = extracted.get(artifactPath);
    if (!pending) {
      pending = extractArtifactCached(artifactPath, cacheDir);
      extracted.set(artifactPath, pending);
      pending.catch(() => extracted.delete(artifactPath));
    }
    return pending;
  };
  return {
    name: "process",
    async start(launch) {
      const dir = await artifactDir(launch.artifactPath);
      const child = spawn(options.nodePath ?? process.execPath, [entry], {
        cwd: dir,
        env: workerEnvironment(launch, dir, options.baseEnv ?? process.env, process.pid),
        stdio: ["ignore", "pipe", "pipe"]
      });
      for (const [stream, name] of [
        [child.stdout, "stdout"],
        [child.stderr, "stderr"]
      ]) {
        if (!stream) continue;
        createInterface({ input: stream, crlfDelay: Infinity }).on("line", (text) => {
          try {
            launch.onLog({ ts: Date.now(), stream: name, text });
          } catch {
          }
        });
      }
      const exited = new Promise((resolve3) => {
        child.once("exit", (code, signal) => {
          children.delete(launch.workerId);
          resolve3({ code, signal });
        });
        child.once("error", (err) => {
          children.delete(launch.workerId);
          launch.onLog({ ts: Date.now(), stream: "stderr", text: `[svc] could not start the worker: ${err.message}` });
          resolve3({ code: null, signal: null });
        });
      });
      const alive = () => child.exitCode === null && child.signalCode === null;
      const handle = {
        workerId: launch.workerId,
        exited,
        stop(graceMs) {
          if (alive()) {
            child.kill("SIGTERM");
            const timer = setTimeout(() => alive() && child.kill("SIGKILL"), graceMs);
            void exited.then(() => clearTimeout(timer));
          }
          return exited;
        },
        kill() {
          if (alive()) child.kill("SIGKILL");
        }
      };
      children.set(launch.workerId, { child, handle });
      return handle;
    },
    async close() {
      const grace = options.closeGraceMs ?? 3e3;
      await Promise.all([...children.values()].map(({ handle }) => handle.stop(grace)));
      process.off("exit", killAll);
    }
  };
}

// src/service/index.ts
import { createHash as createHash3 } from "node:crypto";
import { createReadStream as createReadStream2, existsSync as existsSync2 } from "node:fs";
import { copyFile, mkdir as mkdir2, rename as rename2 } from "node:fs/promises";
import { createServer } from "node:http";
import { join as join3 } from "node:path";

// src/service/auth.ts
import { createHash as createHash2, randomBytes as randomBytes2, timingSafeEqual } from "node:crypto";
var DEFAULT_USER = "default";
function hashKey(key) {
  return createHash2("sha256").update(key).digest("hex");
}
function newKey(prefix) {
  return `${prefix}_${randomBytes2(24).toString("base64url")}`;
}
function newId(bytes = 8) {
  return randomBytes2(bytes).toString("hex");
}
function principalOf(row) {
  const workerScope = row.scopes.find((s) => s.startsWith("worker:"));
  return {
    keyId: row.id,
    userId: row.userId,
    scopes: row.scopes,
    worker: workerScope ? { workerId: row.id, endpointId: workerScope.slice("worker:".length) } : void 0
  };
}
function canUseJobs(p, endpointId2) {
  if (p.worker) return false;
  return p.scopes.includes("admin") || p.scopes.includes("jobs:*") || p.scopes.includes(`jobs:${endpointId2}`);
}
var KeyRing = class {
  constructor(store) {
    this.store = store;
  }
  store;
  cache = /* @__PURE__ */ new Map();
  /** The principal of a key, or undefined when the key is unknown or revoked. */
  async authenticate(key) {
    const hash = hashKey(key);
    const cached = this.cache.get(hash);
    if (cached !== void 0) return cached ?? void 0;
    const row = await this.store.keyByHash(hash);
    const valid = row !== void 0 && row.revokedAt === null && timingSafeEqual(Buffer.from(row.hash, "hex"), Buffer.from(hash, "hex"));
    const principal = valid ? principalOf(row) : null;
    if (this.cache.size > 1e4) this.cache.clear();
    this.cache.set(hash, principal);
    return principal ?? void 0;
  }
  /** Forget cached answers (after a key was revoked or deleted). */
  forget() {
    this.cache.clear();
  }
};

// src/service/engine.ts
import { randomBytes as randomBytes3 } from "node:crypto";

// src/sdk/jobs-client.ts
var FINAL_STATUSES = ["COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT"];
var JobsClient = class {
  base;
  headers;
  /** `base` is the endpoint's job API address, `{queue_base_url}/v2/{endpoint_id}`. */
  constructor(base, apiKey) {
    this.base = base.replace(/\/+$/, "");
    this.headers = { "content-type": "application/json" };
    if (apiKey) this.headers.authorization = `Bearer ${apiKey}`;
  }
  run(input, options = {}) {
    return this.request("POST", "/run", { input, ...options });
  }
  runsync(input, options = {}) {
    const { wait, ...rest } = options;
    return this.request("POST", `/runsync${wait ? `?wait=${wait}` : ""}`, { input, ...rest });
  }
  status(id2, options = {}) {
    return this.request("GET", `/status/${encodeURIComponent(id2)}${options.ttl ? `?ttl=${options.ttl}` : ""}`);
  }
  statusSync(id2, wait) {
    return this.request("GET", `/status-sync/${encodeURIComponent(id2)}?wait=${wait}`);
  }
  stream(id2) {
    return this.request("GET", `/stream/${encodeURIComponent(id2)}`);
  }
  cancel(id2) {
    return this.request("POST", `/cancel/${encodeURIComponent(id2)}`);
  }
  retry(id2) {
    return this.request("POST", `/retry/${encodeURIComponent(id2)}`);
  }
  purgeQueue() {
    return this.request("POST", "/purge-queue");
  }
  health() {
    return this.request("GET", "/health");
  }
  /** Poll until the job reaches a final state (uses /status-sync so it does not spin). */
  async waitFor(id2, timeoutMs = 24 * 3600 * 1e3) {
    const deadline = Date.now() + timeoutMs;
    for (; ; ) {
      const left = deadline - Date.now();
      const record = await this.statusSync(id2, Math.max(1e3, Math.min(3e4, left)));
      if (FINAL_STATUSES.includes(record.status) || Date.now() >= deadline) return record;
    }
  }
  async request(method, path, body) {
    const url = this.base + path;
    let response;
    try {
      response = await fetch(url, {
        method,
        headers: this.headers,
        body: body === void 0 ? void 0 : JSON.stringify(body)
      });
    } catch (err) {
      throw new UnreachableError(url, err);
    }
    return readJson(response);
  }
};
async function readJson(response) {
  const text = await response.text();
  if (!response.ok) {
    let problem;
    try {
      problem = JSON.parse(text);
      if (typeof problem.status !== "number") throw new Error("not a problem");
    } catch {
      problem = { title: response.statusText || "Error", status: response.status, detail: text.slice(0, 500) };
    }
    throw new ApiError(problem);
  }
  return text ? JSON.parse(text) : void 0;
}

// src/sdk/config.ts
var DEFAULTS = {
  cpu: "cpu3c-1-2",
  workersMin: 0,
  workersMax: 3,
  idleTimeout: 60,
  executionTimeout: 600,
  maxConcurrency: 1,
  retries: 1
};
var LIMITS = {
  workersMax: 100,
  idleTimeoutMax: 3600,
  executionTimeoutMax: 24 * 3600,
  maxConcurrencyMax: 1e3,
  retriesMax: 10
};

// src/service/http.ts
var TITLES = {
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  405: "Method Not Allowed",
  413: "Payload Too Large",
  422: "Unprocessable Entity",
  429: "Too Many Requests",
  500: "Internal Server Error",
  503: "Service Unavailable"
};
var HttpProblem = class extends Error {
  status;
  errors;
  headers;
  constructor(status, detail, opts = {}) {
    super(detail);
    this.status = status;
    this.errors = opts.errors;
    this.headers = opts.headers;
  }
};
function problemBody(status, detail, errors) {
  const body = { title: TITLES[status] ?? "Error", status, detail };
  if (errors && errors.length > 0) body.errors = errors;
  return body;
}
function sendProblem(res, status, detail, opts = {}) {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const text = JSON.stringify(problemBody(status, detail, opts.errors));
  res.writeHead(status, {
    "content-type": "application/problem+json",
    "content-length": Buffer.byteLength(text),
    ...opts.headers
  });
  res.end(text);
}
function sendJson(res, value, status = 200) {
  const text = JSON.stringify(value);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}
function readBody(req, limit) {
  const declared = Number(req.headers["content-length"]);
  if (Number.isFinite(declared) && declared > limit) {
    return Promise.reject(tooLarge(req, limit));
  }
  return new Promise((resolve3, reject) => {
    const chunks = [];
    let size = 0;
    let failed = false;
    req.on("data", (chunk) => {
      if (failed) return;
      size += chunk.length;
      if (size > limit) {
        failed = true;
        chunks.length = 0;
        reject(tooLarge(req, limit));
        return;
      }
      chunks.push(chunk);
    });
    req.on("end", () => {
      if (!failed) resolve3(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks));
    });
    req.on("error", (err) => {
      if (!failed) reject(err);
    });
  });
}
function tooLarge(req, limit) {
  let discarded = 0;
  req.on("data", (chunk) => {
    discarded += chunk.length;
    if (discarded > limit * 4) req.destroy();
  });
  req.resume();
  return new HttpProblem(413, `The request body is larger than the limit of ${limit} bytes for this route`, {
    headers: { connection: "close" }
  });
}
function parseJson(body) {
  if (body.length === 0) return void 0;
  try {
    return JSON.parse(body.toString("utf8"));
  } catch (err) {
    throw new HttpProblem(400, `The request body is not valid JSON: ${err.message}`);
  }
}
function isPlainObject(value) {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
function intParam(url, name, min, max) {
  const raw = url.searchParams.get(name);
  if (raw === null) return void 0;
  const value = Number(raw);
  if (!/^-?\d+$/.test(raw) || value < min || value > max) {
    throw new HttpProblem(422, `Query parameter "${name}" is invalid`, {
      errors: [`$.query.${name}: must be an integer from ${min} to ${max}`]
    });
  }
  return value;
}
function keyFromHeader(header) {
  if (!header) return void 0;
  const trimmed = header.trim();
  const bearer = /^Bearer\s+(\S+)$/i.exec(trimmed);
  if (bearer) return bearer[1];
  if (/\s/.test(trimmed) || trimmed.length === 0) return void 0;
  return trimmed;
}

// src/service/queue.ts
var IdQueue = class {
  items = [];
  head = 0;
  get length() {
    return this.items.length - this.head;
  }
  push(id2) {
    this.items.push(id2);
  }
  /** Put an id back at the front (a job whose attempt was lost keeps its place). */
  unshift(id2) {
    if (this.head > 0) this.items[--this.head] = id2;
    else this.items.unshift(id2);
  }
  shift() {
    if (this.head >= this.items.length) return void 0;
    const id2 = this.items[this.head++];
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return id2;
  }
  *[Symbol.iterator]() {
    for (let i = this.head; i < this.items.length; i++) yield this.items[i];
  }
  clear() {
    this.items = [];
    this.head = 0;
  }
};

// src/service/engine.ts
var RUN_RETENTION_MS = 30 * 6e4;
var RUNSYNC_RETENTION_MS = 6e4;
var RUNSYNC_WAIT_RETENTION_MAX_MS = 5 * 6e4;
var MAX_CHUNK_BYTES = 1024 * 1024;
var MAX_TAKE_WAIT_MS = 3e4;
var STREAM_WAIT_MS = 1500;
function workerState(w) {
  if (!w.registered) return "initializing";
  return w.held.size > 0 ? "running" : "idle";
}
function isFinal(status) {
  return FINAL_STATUSES.includes(status);
}
var JobEngine = class {
  constructor(store, options, hooks = {}) {
    this.store = store;
    this.options = options;
    this.hooks = hooks;
  }
  store;
  options;
  hooks;
  endpoints = /* @__PURE__ */ new Map();
  workers = /* @__PURE__ */ new Map();
  live = /* @__PURE__ */ new Map();
  leases = /* @__PURE__ */ new Map();
  running = /* @__PURE__ */ new Set();
  queues = /* @__PURE__ */ new Map();
  stats = /* @__PURE__ */ new Map();
  counterDeltas = /* @__PURE__ */ new Map();
  takers = /* @__PURE__ */ new Map();
  jobWaiters = /* @__PURE__ */ new Map();
  logFollowers = /* @__PURE__ */ new Map();
  batch = [];
  batchPromise;
  batchSettle;
  afterCommit = [];
  flushScheduled = false;
  /** Batches commit strictly in order, even with a store whose apply is truly asynchronous. */
  lastFlush = Promise.resolve();
  closed = false;
  // ---------------------------------------------------------------- group commit
  /** Append ops to the current batch; resolves when the batch is committed. */
  write(ops, after) {
    for (const o of ops) this.batch.push(o);
    if (after) this.afterCommit.push(after);
    if (!this.batchPromise) {
      this.batchPromise = new Promise((resolve3, reject) => {
        this.batchSettle = { resolve: resolve3, reject };
      });
      this.batchPromise.catch(() => void 0);
    }
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      setImmediate(() => {
        this.lastFlush = this.lastFlush.then(() => this.flush());
      });
    }
    return this.batchPromise;
  }
  async flush() {
    this.flushScheduled = false;
    this.collectCounters();
    const ops = this.batch;
    const settle = this.batchSettle;
    const after = this.afterCommit;
    this.batch = [];
    this.batchPromise = void 0;
    this.batchSettle = void 0;
    this.afterCommit = [];
    try {
      await this.store.apply(ops);
    } catch (err) {
      settle?.reject(err);
      return;
    }
    for (const fn of after) {
      try {
        fn();
      } catch {
      }
    }
    settle?.resolve();
  }
  collectCounters() {
    for (const [endpointId2, d] of this.counterDeltas) {
      this.batch.push({ op: "addCounters", endpointId: endpointId2, ...d });
    }
    this.counterDeltas.clear();
  }
  count(endpointId2, key) {
    this.statsOf(endpointId2)[key]++;
    let d = this.counterDeltas.get(endpointId2);
    if (!d) this.counterDeltas.set(endpointId2, d = { completed: 0, failed: 0, retried: 0 });
    d[key]++;
  }
  // ---------------------------------------------------------------- start / stop
  /** Rebuild the in-memory index from the store. Running jobs keep their lease for one more lease period. */
  async load(endpointCounters) {
    for (const e of endpointCounters) {
      this.stats.set(e.id, { completed: e.completed, failed: e.failed, retried: e.retried, inQueue: 0, inProgress: 0 });
    }
    const now = Date.now();
    for (const row of await this.store.activeJobs()) {
      const job = { row, leaseExpiresAt: now + this.options.leaseMs, lastSeq: await this.store.lastChunkSeq(row.id), version: 0 };
      this.live.set(row.id, job);
      const stats = this.statsOf(row.endpointId);
      if (row.status === "IN_QUEUE") {
        this.queueOf(row.endpointId)[row.lowPriority ? "low" : "normal"].push(row.id);
        stats.inQueue++;
      } else {
        this.running.add(row.id);
        if (row.lease) this.leases.set(row.lease, row.id);
        stats.inProgress++;
      }
    }
  }
  async close() {
    this.closed = true;
    for (const list of this.takers.values()) for (const t of list) {
      clearTimeout(t.timer);
      t.resolve([]);
    }
    this.takers.clear();
    for (const w of this.workers.values()) w.wakeEvents?.();
    for (const set of this.jobWaiters.values()) for (const fn of set) fn();
    await this.write([]);
  }
  // ---------------------------------------------------------------- helpers
  statsOf(endpointId2) {
    let s = this.stats.get(endpointId2);
    if (!s) this.stats.set(endpointId2, s = { completed: 0, failed: 0, retried: 0, inQueue: 0, inProgress: 0 });
    return s;
  }
  queueOf(endpointId2) {
    let q = this.queues.get(endpointId2);
    if (!q) this.queues.set(endpointId2, q = { normal: new IdQueue(), low: new IdQueue() });
    return q;
  }
  notifyJob(id2) {
    const set = this.jobWaiters.get(id2);
    if (!set) return;
    this.jobWaiters.delete(id2);
    for (const fn of set) fn();
  }
  /** Change a live job; the update goes into the batch and waiters hear of it after commit. */
  change(job, set) {
    Object.assign(job.row, set);
    const version = ++job.version;
    const id2 = job.row.id;
    return this.write([{ op: "updateJob", id: id2, set }], () => {
      if (isFinal(job.row.status) && job.version === version && this.live.get(id2) === job) this.live.delete(id2);
      this.notifyJob(id2);
    });
  }
  /** A job of an endpoint that is not expired, loaded into memory when `forChange`. */
  async find(endpointId2, id2) {
    let job = this.live.get(id2);
    if (!job) {
      const row = await this.store.getJob(id2);
      job = this.live.get(id2);
      if (!job) {
        if (!row) return void 0;
        job = { row, leaseExpiresAt: 0, lastSeq: -1, version: 0 };
      }
    }
    if (job.row.endpointId !== endpointId2) return void 0;
    if (job.row.expiresAt !== null && job.row.expiresAt <= Date.now()) return void 0;
    return job;
  }
  adopt(job) {
    const existing = this.live.get(job.row.id);
    if (existing) return existing;
    this.live.set(job.row.id, job);
    return job;
  }
  endpoint(endpointId2) {
    return this.endpoints.get(endpointId2);
  }
  // ---------------------------------------------------------------- job API
  async submit(endpointId2, s) {
    if (this.closed) throw new HttpProblem(503, "The service is shutting down");
    const endpoint = this.endpoint(endpointId2);
    const now = Date.now();
    const ttlMs = s.ttlMs ?? (s.sync ? s.waitMs !== void 0 ? Math.min(RUNSYNC_WAIT_RETENTION_MAX_MS, Math.max(RUNSYNC_RETENTION_MS, s.waitMs)) : RUNSYNC_RETENTION_MS : RUN_RETENTION_MS);
    const row = {
      id: `${newId(8)}-${now.toString(36)}`,
      endpointId: endpointId2,
      status: "IN_QUEUE",
      input: JSON.stringify(s.input),
      function: s.function ?? null,
      webhook: s.webhook ?? null,
      sync: s.sync,
      lowPriority: Boolean(s.lowPriority),
      createdAt: now,
      startedAt: null,
      completedAt: null,
      output: null,
      error: null,
      errorType: null,
      errorStack: null,
      attempt: 0,
      retried: 0,
      executionTimeoutMs: s.executionTimeoutMs ?? endpoint?.executionTimeoutMs ?? DEFAULTS.executionTimeout * 1e3,
      ttlMs,
      expiresAt: null,
      lease: null,
      workerId: null,
      streamCursor: 0
    };
    const job = { row, leaseExpiresAt: 0, lastSeq: 0, version: 0 };
    this.live.set(row.id, job);
    const committed = this.write([{ op: "insertJob", job: { ...row } }]);
    this.enqueue(job, false);
    await committed;
    return row;
  }
  enqueue(job, front) {
    const q = this.queueOf(job.row.endpointId)[job.row.lowPriority ? "low" : "normal"];
    if (front) q.unshift(job.row.id);
    else q.push(job.row.id);
    this.statsOf(job.row.endpointId).inQueue++;
    this.dispatch(job.row.endpointId);
    if (this.statsOf(job.row.endpointId).inQueue > 0) this.hooks.onDemand?.(job.row.endpointId);
  }
  /** The record as the job API shows it. */
  async record(endpointId2, id2) {
    return (await this.find(endpointId2, id2))?.row;
  }
  /** Wait until the job is final (or `ms` passed); returns the current record. */
  async waitFinal(endpointId2, id2, ms) {
    const deadline = Date.now() + ms;
    for (; ; ) {
      const job = await this.find(endpointId2, id2);
      if (!job || isFinal(job.row.status) || this.closed) return job?.row;
      const left = deadline - Date.now();
      if (left <= 0) return job.row;
      await this.waitChange(id2, left);
    }
  }
  waitChange(id2, ms) {
    return new Promise((resolve3) => {
      let set = this.jobWaiters.get(id2);
      if (!set) this.jobWaiters.set(id2, set = /* @__PURE__ */ new Set());
      const done = () => {
        clearTimeout(timer);
        const current = this.jobWaiters.get(id2);
        current?.delete(done);
        if (current?.size === 0) this.jobWaiters.delete(id2);
        resolve3();
      };
      const timer = setTimeout(done, ms);
      set.add(done);
    });
  }
  /** Set a job's time-to-live (the /status `ttl` query): a final job then expires `ttlMs` from now. */
  async setTtl(endpointId2, id2, ttlMs) {
    const found = await this.find(endpointId2, id2);
    if (!found) return void 0;
    const job = this.adopt(found);
    await this.change(job, { ttlMs, ...isFinal(job.row.status) ? { expiresAt: Date.now() + ttlMs } : {} });
    return job.row;
  }
  /** Stream chunks not returned before; waits briefly for new ones while the job runs. */
  async readStream(endpointId2, id2) {
    const deadline = Date.now() + STREAM_WAIT_MS;
    for (; ; ) {
      const found = await this.find(endpointId2, id2);
      if (!found) return void 0;
      const cursor = found.row.streamCursor;
      const chunks = await this.store.chunksAfter(id2, cursor);
      const left = deadline - Date.now();
      if (chunks.length > 0 || isFinal(found.row.status) || left <= 0 || this.closed) {
        if (chunks.length > 0) {
          const job = this.adopt(found);
          await this.change(job, { streamCursor: chunks[chunks.length - 1].seq });
        }
        return { status: found.row.status, chunks: chunks.map((c2) => c2.data) };
      }
      await this.waitChange(id2, left);
    }
  }
  async cancel(endpointId2, id2) {
    const found = await this.find(endpointId2, id2);
    if (!found) return void 0;
    const job = this.adopt(found);
    const status = job.row.status;
    if (isFinal(status)) {
      throw new HttpProblem(400, `Job ${id2} is already ${status}; only IN_QUEUE and IN_PROGRESS jobs can be cancelled`);
    }
    await this.finish(job, { status: "CANCELLED" }, true);
    return job.row;
  }
  async retry(endpointId2, id2) {
    const found = await this.find(endpointId2, id2);
    if (!found) return void 0;
    if (found.row.status !== "FAILED" && found.row.status !== "TIMED_OUT") {
      throw new HttpProblem(400, `Job ${id2} is ${found.row.status}; only FAILED and TIMED_OUT jobs can be retried`);
    }
    const job = this.adopt(found);
    const committed = this.change(job, {
      status: "IN_QUEUE",
      output: null,
      error: null,
      errorType: null,
      errorStack: null,
      startedAt: null,
      completedAt: null,
      expiresAt: null,
      lease: null,
      workerId: null,
      retried: 0
    });
    this.enqueue(job, false);
    await committed;
    return job.row;
  }
  async purge(endpointId2) {
    const q = this.queues.get(endpointId2);
    if (!q) return 0;
    const ops = [];
    const ids = [];
    for (const queue of [q.normal, q.low]) {
      for (const id2 of queue) {
        const job = this.live.get(id2);
        if (job && job.row.status === "IN_QUEUE") {
          ids.push(id2);
          ops.push({ op: "deleteJob", id: id2 });
        }
      }
      queue.clear();
    }
    for (const id2 of ids) this.live.delete(id2);
    this.statsOf(endpointId2).inQueue = 0;
    await this.write(ops, () => ids.forEach((id2) => this.notifyJob(id2)));
    return ids.length;
  }
  health(endpointId2) {
    const s = this.statsOf(endpointId2);
    const workers = { idle: 0, running: 0, initializing: 0, draining: 0 };
    for (const w of this.workers.values()) {
      if (w.endpointId !== endpointId2) continue;
      workers[workerState(w)]++;
      if (w.draining) workers.draining++;
    }
    return {
      jobs: { completed: s.completed, failed: s.failed, inProgress: s.inProgress, inQueue: s.inQueue, retried: s.retried },
      workers
    };
  }
  queuedCount(endpointId2) {
    return this.statsOf(endpointId2).inQueue;
  }
  runningCount(endpointId2) {
    return this.statsOf(endpointId2).inProgress;
  }
  /**
   * End a job. `status` is final, except FAILED with retries left, which requeues the job. Releases the lease and
   * tells the worker to stop it when `stopWorker`.
   */
  finish(job, result, stopWorker) {
    const row = job.row;
    const stats = this.statsOf(row.endpointId);
    const wasRunning = row.status === "IN_PROGRESS";
    if (wasRunning) {
      stats.inProgress--;
      this.running.delete(row.id);
      if (row.lease) this.leases.delete(row.lease);
      const worker = row.workerId ? this.workers.get(row.workerId) : void 0;
      if (worker) {
        worker.held.delete(row.id);
        if (worker.held.size === 0) worker.idleSince = Date.now();
        if (stopWorker) {
          worker.cancel.push(row.id);
          worker.wakeEvents?.();
        }
      }
    } else if (row.status === "IN_QUEUE") {
      stats.inQueue--;
    }
    const now = Date.now();
    const error = result.error;
    if (result.status === "FAILED") {
      const retries = this.endpoint(row.endpointId)?.retries ?? DEFAULTS.retries;
      if (row.retried < retries) {
        this.count(row.endpointId, "retried");
        const committed2 = this.change(job, {
          status: "IN_QUEUE",
          retried: row.retried + 1,
          lease: null,
          workerId: null,
          error: null,
          errorType: null,
          errorStack: null
        });
        this.enqueue(job, false);
        return committed2;
      }
      this.count(row.endpointId, "failed");
    } else if (result.status === "COMPLETED") {
      this.count(row.endpointId, "completed");
    }
    const set = {
      status: result.status,
      completedAt: now,
      expiresAt: now + row.ttlMs,
      lease: null
    };
    if (result.status === "COMPLETED") set.output = result.output ?? null;
    if (result.status === "FAILED") {
      set.error = typeof error?.message === "string" ? error.message : "The handler failed";
      set.errorType = typeof error?.type === "string" ? error.type : null;
      set.errorStack = typeof error?.stack === "string" ? error.stack : null;
    }
    if (result.status === "TIMED_OUT") {
      set.error = `The job ran longer than its execution timeout of ${row.executionTimeoutMs} ms`;
      set.errorType = "TimeoutError";
    }
    const committed = this.change(job, set);
    void committed.then(() => this.hooks.onFinal?.(job.row), () => void 0);
    return committed;
  }
  // ---------------------------------------------------------------- workers
  /** Known to the service (started by the scaler, or first seen with a valid token). */
  ensureWorker(workerId, endpointId2, managed = false) {
    let w = this.workers.get(workerId);
    if (!w) {
      const now = Date.now();
      w = {
        id: workerId,
        endpointId: endpointId2,
        registered: false,
        draining: false,
        managed,
        concurrency: 1,
        held: /* @__PURE__ */ new Set(),
        startedAt: now,
        lastSeen: now,
        idleSince: now,
        polling: 0,
        cancel: []
      };
      this.workers.set(workerId, w);
    }
    return w;
  }
  register(workerId, endpointId2, concurrency) {
    const w = this.ensureWorker(workerId, endpointId2);
    w.registered = true;
    w.concurrency = Math.max(1, Math.floor(concurrency) || 1);
    w.lastSeen = Date.now();
    w.idleSince = Date.now();
    return w;
  }
  /** A worker is gone (exited): its jobs go back to the queue at once. */
  workerGone(workerId) {
    const w = this.workers.get(workerId);
    if (!w) return;
    this.workers.delete(workerId);
    for (const t of this.takers.get(w.endpointId) ?? []) {
      if (t.workerId === workerId) {
        clearTimeout(t.timer);
        t.resolve([]);
      }
    }
    this.takers.set(w.endpointId, (this.takers.get(w.endpointId) ?? []).filter((t) => t.workerId !== workerId));
    for (const id2 of [...w.held]) {
      const job = this.live.get(id2);
      if (job && job.row.status === "IN_PROGRESS" && job.row.workerId === workerId) this.requeue(job);
    }
    w.wakeEvents?.();
  }
  drain(workerId) {
    const w = this.workers.get(workerId);
    if (!w) return;
    w.draining = true;
    w.wakeEvents?.();
    for (const t of this.takers.get(w.endpointId) ?? []) {
      if (t.workerId === workerId) {
        clearTimeout(t.timer);
        t.resolve([]);
      }
    }
    this.takers.set(w.endpointId, (this.takers.get(w.endpointId) ?? []).filter((t) => t.workerId !== workerId));
  }
  /** Take up to `max` jobs, waiting up to `waitMs` for one. */
  async take(w, max, waitMs, signal) {
    w.lastSeen = Date.now();
    let rows = w.draining || this.closed ? [] : this.grab(w, max);
    if (rows.length === 0 && waitMs > 0 && !w.draining && !this.closed) {
      w.polling++;
      try {
        rows = await new Promise((resolve3) => {
          const taker = {
            workerId: w.id,
            max,
            resolve: resolve3,
            timer: setTimeout(() => {
              const list2 = this.takers.get(w.endpointId);
              if (list2) this.takers.set(w.endpointId, list2.filter((t) => t !== taker));
              resolve3([]);
            }, waitMs)
          };
          let list = this.takers.get(w.endpointId);
          if (!list) this.takers.set(w.endpointId, list = []);
          list.push(taker);
          signal?.addEventListener(
            "abort",
            () => {
              const current = this.takers.get(w.endpointId);
              if (!current?.includes(taker)) return;
              this.takers.set(w.endpointId, current.filter((t) => t !== taker));
              clearTimeout(taker.timer);
              resolve3([]);
            },
            { once: true }
          );
        });
      } finally {
        w.polling--;
        w.lastSeen = Date.now();
      }
    }
    if (rows.length > 0) {
      await this.write([]);
      this.hooks.onTaken?.(w.endpointId, w.id);
    }
    return rows;
  }
  /** Move up to `max` queued jobs to IN_PROGRESS under fresh leases held by `w`. */
  grab(w, max) {
    const q = this.queues.get(w.endpointId);
    if (!q) return [];
    const rows = [];
    const now = Date.now();
    const stats = this.statsOf(w.endpointId);
    while (rows.length < max) {
      const id2 = q.normal.shift() ?? q.low.shift();
      if (id2 === void 0) break;
      const job = this.live.get(id2);
      if (!job || job.row.status !== "IN_QUEUE") continue;
      const lease = randomBytes3(12).toString("base64url");
      stats.inQueue--;
      stats.inProgress++;
      this.running.add(id2);
      this.leases.set(lease, id2);
      w.held.add(id2);
      job.leaseExpiresAt = now + this.options.leaseMs;
      void this.change(job, { status: "IN_PROGRESS", lease, workerId: w.id, startedAt: now, attempt: job.row.attempt + 1 });
      rows.push(job.row);
    }
    return rows;
  }
  /** Hand queued jobs to waiting takers. */
  dispatch(endpointId2) {
    const list = this.takers.get(endpointId2);
    if (!list || list.length === 0) return;
    while (list.length > 0 && this.statsOf(endpointId2).inQueue > 0) {
      const taker = list.shift();
      const w = this.workers.get(taker.workerId);
      if (!w || w.draining) {
        clearTimeout(taker.timer);
        taker.resolve([]);
        continue;
      }
      const rows = this.grab(w, taker.max);
      if (rows.length === 0) {
        list.unshift(taker);
        break;
      }
      clearTimeout(taker.timer);
      taker.resolve(rows);
    }
  }
  requeue(job) {
    const row = job.row;
    const stats = this.statsOf(row.endpointId);
    stats.inProgress--;
    this.running.delete(row.id);
    if (row.lease) this.leases.delete(row.lease);
    const w = row.workerId ? this.workers.get(row.workerId) : void 0;
    if (w) {
      w.held.delete(row.id);
      if (w.held.size === 0) w.idleSince = Date.now();
    }
    void this.change(job, { status: "IN_QUEUE", lease: null, workerId: null });
    this.enqueue(job, true);
  }
  /** The live running job a lease belongs to, if the lease is still current. */
  byLease(lease) {
    if (typeof lease !== "string") return void 0;
    const id2 = this.leases.get(lease);
    const job = id2 ? this.live.get(id2) : void 0;
    return job && job.row.status === "IN_PROGRESS" && job.row.lease === lease ? job : void 0;
  }
  heartbeat(w, leases) {
    const now = Date.now();
    w.lastSeen = now;
    const lost = [];
    for (const lease of leases) {
      const job = this.byLease(lease);
      if (job && job.row.endpointId === w.endpointId) job.leaseExpiresAt = now + this.options.leaseMs;
      else lost.push(String(lease));
    }
    return lost;
  }
  /** Let leases go (a stopping worker hands its jobs back). */
  release(w, leases) {
    let released = 0;
    for (const lease of leases) {
      const job = this.byLease(lease);
      if (job && job.row.endpointId === w.endpointId) {
        this.requeue(job);
        released++;
      }
    }
    return released;
  }
  async done(w, results) {
    w.lastSeen = Date.now();
    const answers = [];
    const pending = [];
    for (const r of results) {
      const job = this.byLease(r.lease);
      if (!job || job.row.id !== r.jobId || job.row.endpointId !== w.endpointId) {
        const current = this.live.get(r.jobId);
        const reason = current && isFinal(current.row.status) ? `job is ${current.row.status}` : "lease lost";
        answers.push({ jobId: r.jobId, accepted: false, reason });
        continue;
      }
      const output = r.status === "COMPLETED" && r.output !== void 0 ? JSON.stringify(r.output) : null;
      pending.push(this.finish(job, { status: r.status, output, error: r.error }, false));
      answers.push({ jobId: r.jobId, accepted: true });
    }
    await Promise.all(pending);
    return answers;
  }
  /** Append stream chunks of a running job; chunks over 1 MB are split. */
  async appendStream(w, jobId, lease, chunks) {
    const job = this.byLease(lease);
    if (!job || job.row.id !== jobId || job.row.endpointId !== w.endpointId) return false;
    const ops = [];
    for (const chunk of chunks) {
      for (const piece of splitChunk(chunk)) {
        ops.push({ op: "insertChunk", chunk: { jobId, seq: ++job.lastSeq, data: piece } });
      }
    }
    await this.write(ops, () => this.notifyJob(jobId));
    return true;
  }
  /** Long-poll the worker's stop channel. */
  async events(w, waitMs) {
    w.lastSeen = Date.now();
    if (w.cancel.length === 0 && !w.draining && waitMs > 0 && !this.closed) {
      w.polling++;
      try {
        await new Promise((resolve3) => {
          const timer = setTimeout(() => wake(), waitMs);
          const wake = () => {
            clearTimeout(timer);
            if (w.wakeEvents === wake) w.wakeEvents = void 0;
            resolve3();
          };
          w.wakeEvents?.();
          w.wakeEvents = wake;
        });
      } finally {
        w.polling--;
        w.lastSeen = Date.now();
      }
    }
    const cancel = w.cancel;
    w.cancel = [];
    return { cancel, drain: w.draining || this.closed };
  }
  // ---------------------------------------------------------------- logs
  appendLogs(lines) {
    if (lines.length === 0) return Promise.resolve();
    return this.write(
      lines.map((line) => ({ op: "insertLog", line })),
      () => {
        const byEndpoint = /* @__PURE__ */ new Map();
        for (const l of lines) {
          if (!this.logFollowers.has(l.endpointId)) continue;
          let list = byEndpoint.get(l.endpointId);
          if (!list) byEndpoint.set(l.endpointId, list = []);
          list.push(l);
        }
        for (const [endpointId2, list] of byEndpoint) for (const fn of this.logFollowers.get(endpointId2) ?? []) fn(list);
      }
    );
  }
  queryLogs(q) {
    return this.store.logs(q);
  }
  followLogs(endpointId2, fn) {
    let set = this.logFollowers.get(endpointId2);
    if (!set) this.logFollowers.set(endpointId2, set = /* @__PURE__ */ new Set());
    set.add(fn);
    return () => {
      set.delete(fn);
      if (set.size === 0) this.logFollowers.delete(endpointId2);
    };
  }
  // ---------------------------------------------------------------- periodic work
  /** Lapsed leases go back to the queue; jobs past their execution timeout end TIMED_OUT. */
  tick(now = Date.now()) {
    for (const id2 of [...this.running]) {
      const job = this.live.get(id2);
      if (!job || job.row.status !== "IN_PROGRESS") {
        this.running.delete(id2);
        continue;
      }
      const timeout = job.row.executionTimeoutMs;
      if (timeout && job.row.startedAt !== null && now - job.row.startedAt > timeout) {
        void this.finish(job, { status: "TIMED_OUT" }, true).catch(() => void 0);
      } else if (job.leaseExpiresAt <= now) {
        this.requeue(job);
      }
    }
  }
  async sweep(now = Date.now()) {
    const ids = await this.store.deleteExpired(now);
    for (const id2 of ids) {
      const job = this.live.get(id2);
      if (job && isFinal(job.row.status)) this.live.delete(id2);
    }
    return ids.length;
  }
  /** Forget an endpoint's jobs and workers (the endpoint was deleted). */
  dropEndpoint(endpointId2) {
    for (const [id2, job] of this.live) {
      if (job.row.endpointId !== endpointId2) continue;
      this.live.delete(id2);
      this.running.delete(id2);
      if (job.row.lease) this.leases.delete(job.row.lease);
      this.notifyJob(id2);
    }
    for (const t of this.takers.get(endpointId2) ?? []) {
      clearTimeout(t.timer);
      t.resolve([]);
    }
    this.takers.delete(endpointId2);
    this.queues.delete(endpointId2);
    this.stats.delete(endpointId2);
    this.counterDeltas.delete(endpointId2);
    this.endpoints.delete(endpointId2);
    return this.write([{ op: "deleteEndpoint", id: endpointId2 }]);
  }
};
function splitChunk(chunk, limit = MAX_CHUNK_BYTES) {
  const normalized = typeof chunk === "object" && chunk !== null && !Array.isArray(chunk) && "output" in chunk ? chunk : { output: chunk };
  const text = JSON.stringify(normalized);
  if (Buffer.byteLength(text) <= limit) return [text];
  const { output, metrics } = normalized;
  const wrap = (o, first) => JSON.stringify(first && metrics !== void 0 ? { output: o, metrics } : { output: o });
  const budget = Math.max(1024, limit - 4096 - (metrics === void 0 ? 0 : Buffer.byteLength(JSON.stringify(metrics))));
  if (typeof output === "string") {
    const pieces = [];
    const step = Math.max(1, Math.floor(budget / 6));
    for (let i = 0; i < output.length; i += step) pieces.push(wrap(output.slice(i, i + step), i === 0));
    return pieces;
  }
  if (Array.isArray(output)) {
    const pieces = [];
    let current = [];
    let size = 2;
    for (const item of output) {
      const itemSize = Buffer.byteLength(JSON.stringify(item) ?? "null") + 1;
      if (current.length > 0 && size + itemSize > budget) {
        pieces.push(wrap(current, pieces.length === 0));
        current = [];
        size = 2;
      }
      current.push(item);
      size += itemSize;
    }
    if (current.length > 0) pieces.push(wrap(current, pieces.length === 0));
    return pieces;
  }
  if (typeof output === "object" && output !== null) {
    const entries = Object.entries(output);
    const largest = entries.filter(([, v]) => typeof v === "string" || Array.isArray(v)).sort((a, b) => JSON.stringify(b[1]).length - JSON.stringify(a[1]).length)[0];
    if (largest) {
      const [key, value] = largest;
      const rest = Object.fromEntries(entries.filter(([k]) => k !== key));
      return splitChunk({ output: value }, budget).map((piece, i) => {
        const part = JSON.parse(piece).output;
        return wrap(i === 0 ? { ...rest, [key]: part } : { [key]: part }, i === 0);
      });
    }
  }
  return [text];
}

// src/service/validate.ts
var MAX_TTL_MS = 7 * 24 * 36e5;
var MAX_EXECUTION_TIMEOUT_MS = 24 * 36e5;
var IGNORED_PROPERTIES = /* @__PURE__ */ new Set(["s3Config"]);
function validateSubmission(body, functions) {
  const errors = [];
  if (!isPlainObject(body)) return { errors: ['$: must be a JSON object like {"input": {...}}'] };
  for (const key of Object.keys(body)) {
    if (!["input", "function", "webhook", "policy"].includes(key) && !IGNORED_PROPERTIES.has(key)) {
      errors.push(`$.${key}: unknown property`);
    }
  }
  const value = { input: body.input };
  if (!("input" in body) || body.input === void 0) errors.push("$.input: is required");
  if (body.function !== void 0) {
    if (typeof body.function !== "string" || body.function.length === 0) errors.push("$.function: must be a non-empty string");
    else if (functions.length > 0 && !functions.includes(body.function)) {
      errors.push(`$.function: the endpoint has no function "${body.function}" (it serves: ${functions.join(", ")})`);
    } else value.function = body.function;
  }
  if (body.webhook !== void 0) {
    let ok = false;
    if (typeof body.webhook === "string") {
      try {
        ok = ["http:", "https:"].includes(new URL(body.webhook).protocol);
      } catch {
        ok = false;
      }
    }
    if (ok) value.webhook = body.webhook;
    else errors.push("$.webhook: must be an http(s) URL");
  }
  if (body.policy !== void 0) {
    if (!isPlainObject(body.policy)) errors.push("$.policy: must be an object");
    else {
      const p = body.policy;
      for (const key of Object.keys(p)) {
        if (!["executionTimeout", "ttl", "lowPriority"].includes(key)) errors.push(`$.policy.${key}: unknown property`);
      }
      const int = (key, min, max) => {
        const v = p[key];
        if (v === void 0) return void 0;
        if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max) {
          errors.push(`$.policy.${key}: must be an integer (ms) from ${min} to ${max}`);
          return void 0;
        }
        return v;
      };
      value.executionTimeoutMs = int("executionTimeout", 1, MAX_EXECUTION_TIMEOUT_MS);
      value.ttlMs = int("ttl", 1, MAX_TTL_MS);
      if (p.lowPriority !== void 0) {
        if (typeof p.lowPriority !== "boolean") errors.push("$.policy.lowPriority: must be a boolean");
        else value.lowPriority = p.lowPriority;
      }
    }
  }
  return errors.length > 0 ? { errors } : { value, errors };
}

// src/service/api.ts
var RUN_BODY_LIMIT = 10 * 1024 * 1024;
var RUNSYNC_BODY_LIMIT = 20 * 1024 * 1024;
var WORKER_BODY_LIMIT = 64 * 1024 * 1024;
var SMALL_BODY_LIMIT = 1024 * 1024;
var RUNSYNC_WAIT_DEFAULT_MS = 9e4;
function recordJson(row, now) {
  const delayTime = Math.max(0, Math.round((row.startedAt ?? (isFinal(row.status) ? row.completedAt ?? now : now)) - row.createdAt));
  const executionTime = row.startedAt === null ? 0 : Math.max(0, Math.round((row.completedAt ?? now) - row.startedAt));
  let text = `{"id":${JSON.stringify(row.id)},"status":"${row.status}","delayTime":${delayTime},"executionTime":${executionTime}`;
  if (row.output !== null) text += `,"output":${row.output}`;
  if (row.error !== null) {
    text += `,"error":${JSON.stringify(row.error)}`;
    if (row.errorType !== null) text += `,"errorType":${JSON.stringify(row.errorType)}`;
    if (row.errorStack !== null) text += `,"errorStack":${JSON.stringify(row.errorStack)}`;
  }
  if (row.retried > 0) text += `,"retries":${row.retried}`;
  return `${text}}`;
}
function sendText(res, text) {
  res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}
function notFound(what) {
  return new HttpProblem(404, what);
}
function methodCheck(req, allowed) {
  if (!allowed.includes(req.method ?? "")) {
    throw new HttpProblem(405, `${req.method} is not allowed here; use ${allowed.join(" or ")}`, { headers: { allow: allowed.join(", ") } });
  }
}
async function handleRequest(ctx, req, res) {
  try {
    const key = keyFromHeader(req.headers.authorization);
    if (!key) {
      req.resume();
      throw new HttpProblem(401, "Send an API key in the Authorization header: `Authorization: Bearer <key>`", { headers: { "www-authenticate": "Bearer" } });
    }
    const principal = await ctx.keyring.authenticate(key);
    if (!principal) {
      req.resume();
      throw new HttpProblem(401, "The API key is not valid (unknown or revoked)", { headers: { "www-authenticate": "Bearer" } });
    }
    const url = new URL(req.url ?? "/", "http://svc.invalid");
    const segments = url.pathname.split("/").filter(Boolean).map(decodeURIComponent);
    if (segments[0] === "v2" && segments.length >= 3) return await jobRoute(ctx, principal, req, res, url, segments);
    if (segments[0] === "_worker" && segments[1] === "v1" && segments.length === 3) return await workerRoute(ctx, principal, req, res, segments[2]);
    if (segments[0] === "v1" && segments[1] === "apps" && segments[3] === "environments" && segments.length === 5) {
      methodCheck(req, ["GET"]);
      return appEnvironment(ctx, principal, res, segments[2], segments[4]);
    }
    if (segments[0] === "v1" && segments[1] === "endpoints" && segments[3] === "logs" && segments.length === 4) {
      methodCheck(req, ["GET"]);
      return await logs(ctx, principal, req, res, url, segments[2]);
    }
    req.resume();
    throw notFound(`No route ${url.pathname}`);
  } catch (err) {
    if (err instanceof HttpProblem) {
      req.resume();
      sendProblem(res, err.status, err.message, { errors: err.errors, headers: err.headers });
      return;
    }
    if (err instanceof URIError) {
      sendProblem(res, 400, "The request path is not valid");
      return;
    }
    throw err;
  }
}
var JOB_ACTIONS = {
  run: { methods: ["POST"], id: false },
  runsync: { methods: ["POST"], id: false },
  status: { methods: ["GET", "POST"], id: true },
  "status-sync": { methods: ["GET", "POST"], id: true },
  stream: { methods: ["GET", "POST"], id: true },
  cancel: { methods: ["POST"], id: true },
  retry: { methods: ["POST"], id: true },
  "purge-queue": { methods: ["POST"], id: false },
  health: { methods: ["GET"], id: false }
};
function userEndpoint(ctx, principal, id2) {
  const endpoint = ctx.endpoints.get(id2);
  if (!endpoint || endpoint.userId !== principal.userId) throw notFound(`No endpoint ${id2}`);
  if (!canUseJobs(principal, id2)) throw new HttpProblem(403, `This API key has no access to endpoint ${id2}`);
  return endpoint;
}
async function jobRoute(ctx, principal, req, res, url, seg) {
  if (principal.worker) throw new HttpProblem(403, "A worker token cannot call the job API");
  const [, endpointId2, action, jobId] = seg;
  const spec = JOB_ACTIONS[action];
  if (!spec || (spec.id ? seg.length !== 4 : seg.length !== 3)) throw notFound(`No route ${url.pathname}`);
  methodCheck(req, spec.methods);
  const endpoint = userEndpoint(ctx, principal, endpointId2);
  if (endpoint.type !== "queue") throw new HttpProblem(400, `Endpoint ${endpointId2} is load-balanced; it has no job API`);
  const { engine } = ctx;
  const now = () => Date.now();
  switch (action) {
    case "run":
    case "runsync": {
      const sync = action === "runsync";
      const wait = sync ? intParam(url, "wait", 1e3, 3e5) : void 0;
      const body = parseJson(await readBody(req, sync ? RUNSYNC_BODY_LIMIT : RUN_BODY_LIMIT));
      const { value, errors } = validateSubmission(body, endpoint.resource.functions.map((f) => f.name));
      if (!value) throw new HttpProblem(422, "The job submission is not valid", { errors });
      const row = await engine.submit(endpointId2, { ...value, sync, waitMs: wait });
      if (!sync) return sendText(res, `{"id":${JSON.stringify(row.id)},"status":"IN_QUEUE"}`);
      const final = await engine.waitFinal(endpointId2, row.id, wait ?? RUNSYNC_WAIT_DEFAULT_MS);
      return sendText(res, recordJson(final ?? row, now()));
    }
    case "status":
    case "status-sync": {
      req.resume();
      const ttl = intParam(url, "ttl", 1, MAX_TTL_MS);
      let row;
      if (action === "status-sync") {
        const wait = intParam(url, "wait", 1e3, 3e5) ?? RUNSYNC_WAIT_DEFAULT_MS;
        row = await engine.waitFinal(endpointId2, jobId, wait);
      } else row = await engine.record(endpointId2, jobId);
      if (row && ttl !== void 0) row = await engine.setTtl(endpointId2, jobId, ttl);
      if (!row) throw notFound(`No job ${jobId} on endpoint ${endpointId2} (unknown, or its result expired)`);
      return sendText(res, recordJson(row, now()));
    }
    case "stream": {
      req.resume();
      const result = await engine.readStream(endpointId2, jobId);
      if (!result) throw notFound(`No job ${jobId} on endpoint ${endpointId2} (unknown, or its result expired)`);
      return sendText(res, `{"status":"${result.status}","stream":[${result.chunks.join(",")}]}`);
    }
    case "cancel": {
      req.resume();
      const row = await engine.cancel(endpointId2, jobId);
      if (!row) throw notFound(`No job ${jobId} on endpoint ${endpointId2} (unknown, or its result expired)`);
      return sendJson(res, { id: row.id, status: row.status });
    }
    case "retry": {
      req.resume();
      const row = await engine.retry(endpointId2, jobId);
      if (!row) throw notFound(`No job ${jobId} on endpoint ${endpointId2} (unknown, or its result expired)`);
      return sendJson(res, { id: row.id, status: row.status });
    }
    case "purge-queue": {
      req.resume();
      const removed = await engine.purge(endpointId2);
      return sendJson(res, { removed, status: "completed" });
    }
    case "health": {
      req.resume();
      const health = engine.health(endpointId2);
      const coldStarts = ctx.scaler()?.coldStarts.get(endpointId2) ?? { count: 0, lastMs: null };
      return sendJson(res, { ...health, coldStarts });
    }
  }
}
var WORKER_ROUTES = /* @__PURE__ */ new Set(["register", "fail-start", "take", "stream", "done", "heartbeat", "events", "log", "release"]);
function optionalInt(body, key, min, max, fallback, errors) {
  const v = body[key];
  if (v === void 0) return fallback;
  if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max) {
    errors.push(`$.${key}: must be an integer from ${min} to ${max}`);
    return fallback;
  }
  return v;
}
function stringList(body, key, errors) {
  const v = body[key];
  if (v === void 0) return [];
  if (!Array.isArray(v) || !v.every((x) => typeof x === "string")) {
    errors.push(`$.${key}: must be a list of strings`);
    return [];
  }
  return v;
}
async function workerRoute(ctx, principal, req, res, route) {
  if (!principal.worker) throw new HttpProblem(403, "Only worker tokens may call /_worker routes");
  if (!WORKER_ROUTES.has(route)) throw notFound(`No worker route ${route}`);
  methodCheck(req, ["POST"]);
  const { workerId, endpointId: endpointId2 } = principal.worker;
  const endpoint = ctx.endpoints.get(endpointId2);
  if (!endpoint) throw notFound(`Endpoint ${endpointId2} no longer exists`);
  const body = parseJson(await readBody(req, WORKER_BODY_LIMIT)) ?? {};
  if (!isPlainObject(body)) throw new HttpProblem(422, "The body must be a JSON object", { errors: ["$: must be an object"] });
  if (body.workerId !== void 0 && body.workerId !== workerId) {
    throw new HttpProblem(403, `This token belongs to worker ${workerId}, not ${String(body.workerId)}`);
  }
  const { engine } = ctx;
  const worker = engine.ensureWorker(workerId, endpointId2);
  const errors = [];
  const invalid = () => new HttpProblem(422, `The ${route} body is not valid`, { errors });
  switch (route) {
    case "register": {
      const concurrency = optionalInt(body, "concurrency", 1, 1e3, endpoint.resource.maxConcurrency, errors);
      if (errors.length) throw invalid();
      engine.register(workerId, endpointId2, concurrency);
      ctx.scaler()?.registered(endpointId2);
      return sendJson(res, {
        endpoint: { id: endpoint.id, name: endpoint.name, executionTimeoutMs: endpoint.resource.executionTimeoutMs, maxConcurrency: endpoint.resource.maxConcurrency },
        leaseMs: ctx.leaseMs,
        heartbeatMs: ctx.heartbeatMs
      });
    }
    case "fail-start": {
      const message = typeof body.error === "string" ? body.error : JSON.stringify(body.error ?? "unknown error");
      await engine.appendLogs([{ ts: Date.now(), endpointId: endpointId2, workerId, jobId: null, stream: "stderr", text: `worker failed to start: ${message}` }]);
      ctx.log(`worker ${workerId} of endpoint ${endpoint.name} failed to start: ${message}`);
      return sendJson(res, { ok: true });
    }
    case "take": {
      const max = optionalInt(body, "max", 1, 1e3, 1, errors);
      const waitMs = optionalInt(body, "waitMs", 0, MAX_TAKE_WAIT_MS, 0, errors);
      if (errors.length) throw invalid();
      if (!worker.registered) engine.register(workerId, endpointId2, worker.concurrency);
      const hangUp = new AbortController();
      const onClose = () => hangUp.abort();
      res.once("close", onClose);
      const jobs = await engine.take(worker, max, waitMs, hangUp.signal);
      res.off("close", onClose);
      if (res.destroyed) {
        engine.release(worker, jobs.map((j) => j.lease));
        return;
      }
      const items = jobs.map(
        (j) => `{"id":${JSON.stringify(j.id)},"lease":"${j.lease}","function":${JSON.stringify(j.function)},"input":${j.input},"executionTimeoutMs":${j.executionTimeoutMs ?? "null"},"attempt":${j.attempt}}`
      );
      return sendText(res, `{"jobs":[${items.join(",")}]}`);
    }
    case "stream": {
      if (typeof body.jobId !== "string") errors.push("$.jobId: is required");
      if (typeof body.lease !== "string") errors.push("$.lease: is required");
      if (!Array.isArray(body.chunks)) errors.push("$.chunks: must be a list");
      if (errors.length) throw invalid();
      const ok = await engine.appendStream(worker, body.jobId, body.lease, body.chunks);
      return sendJson(res, ok ? { ok: true } : { ok: false, reason: "lease lost" });
    }
    case "done": {
      if (!Array.isArray(body.results)) errors.push("$.results: must be a list");
      const results = Array.isArray(body.results) ? body.results : [];
      results.forEach((r, i) => {
        if (!isPlainObject(r)) return errors.push(`$.results[${i}]: must be an object`);
        if (typeof r.jobId !== "string") errors.push(`$.results[${i}].jobId: is required`);
        if (typeof r.lease !== "string") errors.push(`$.results[${i}].lease: is required`);
        if (r.status !== "COMPLETED" && r.status !== "FAILED") errors.push(`$.results[${i}].status: must be COMPLETED or FAILED`);
        if (r.error !== void 0 && !isPlainObject(r.error)) errors.push(`$.results[${i}].error: must be an object {message, type?, stack?}`);
        return void 0;
      });
      if (errors.length) throw invalid();
      return sendJson(res, { results: await engine.done(worker, results) });
    }
    case "heartbeat": {
      const leases = stringList(body, "leases", errors);
      if (errors.length) throw invalid();
      return sendJson(res, { lost: engine.heartbeat(worker, leases) });
    }
    case "events": {
      const waitMs = optionalInt(body, "waitMs", 0, MAX_TAKE_WAIT_MS, 0, errors);
      if (errors.length) throw invalid();
      const events = await engine.events(worker, waitMs);
      if (res.destroyed) {
        worker.cancel.unshift(...events.cancel);
        return;
      }
      return sendJson(res, events);
    }
    case "log": {
      const lines = body.lines;
      if (!Array.isArray(lines)) errors.push("$.lines: must be a list");
      const rows = [];
      (Array.isArray(lines) ? lines : []).forEach((l, i) => {
        if (!isPlainObject(l) || typeof l.text !== "string") return errors.push(`$.lines[${i}].text: is required`);
        rows.push({
          ts: typeof l.ts === "number" ? l.ts : Date.now(),
          endpointId: endpointId2,
          workerId,
          jobId: typeof l.jobId === "string" ? l.jobId : null,
          stream: l.stream === "stdout" || l.stream === "stderr" ? l.stream : "log",
          text: l.text.slice(0, 64 * 1024)
        });
        return void 0;
      });
      if (errors.length) throw invalid();
      await engine.appendLogs(rows);
      return sendJson(res, { ok: true });
    }
    case "release": {
      const leases = stringList(body, "leases", errors);
      if (errors.length) throw invalid();
      return sendJson(res, { released: engine.release(worker, leases) });
    }
  }
}
function appEnvironment(ctx, principal, res, app, env) {
  if (principal.worker) throw new HttpProblem(403, "A worker token cannot read app state");
  const endpoints = [...ctx.endpoints.values()].filter((e) => e.userId === principal.userId && e.app === app && e.env === env);
  if (endpoints.length === 0) throw notFound(`No app "${app}" with environment "${env}"`);
  const visible = endpoints.filter((e) => canUseJobs(principal, e.id));
  if (visible.length === 0) throw new HttpProblem(403, `This API key has no access to app "${app}", environment "${env}"`);
  sendJson(res, {
    app,
    env,
    endpoints: visible.sort((a, b) => a.name.localeCompare(b.name)).map((e) => ({ name: e.name, id: e.id, url: `${ctx.url}/v2/${e.id}`, type: e.type }))
  });
}
function logJson(l) {
  return JSON.stringify({ ts: l.ts, workerId: l.workerId, jobId: l.jobId, stream: l.stream, text: l.text });
}
async function logs(ctx, principal, req, res, url, endpointId2) {
  req.resume();
  if (principal.worker) throw new HttpProblem(403, "A worker token cannot read logs");
  userEndpoint(ctx, principal, endpointId2);
  const jobId = url.searchParams.get("job") ?? void 0;
  const since = intParam(url, "since", 0, Number.MAX_SAFE_INTEGER);
  const follow = ["1", "true"].includes(url.searchParams.get("follow") ?? "");
  const store = ctx.engine;
  const rows = await store.queryLogs({ endpointId: endpointId2, jobId, since, limit: 1e4 });
  if (!follow) {
    const text = `{"lines":[${rows.map(logJson).join(",")}]}`;
    return sendText(res, text);
  }
  res.writeHead(200, { "content-type": "application/x-ndjson", "cache-control": "no-store" });
  res.flushHeaders();
  if (rows.length > 0) res.write(`${rows.map(logJson).join("\n")}
`);
  ctx.followers.add(res);
  const stop = ctx.engine.followLogs(endpointId2, (lines) => {
    const wanted = lines.filter((l) => (!jobId || l.jobId === jobId) && (since === void 0 || l.ts >= since));
    if (wanted.length > 0) res.write(`${wanted.map(logJson).join("\n")}
`);
  });
  const end = () => {
    stop();
    ctx.followers.delete(res);
  };
  res.on("close", end);
}

// src/service/scaler.ts
function planScaling(s) {
  const drain = [];
  const current = s.workers.filter((w) => w.revision === s.revision);
  const old = s.workers.filter((w) => w.revision !== s.revision);
  for (const w of old) if (w.state !== "running") drain.push(w.id);
  const concurrency = Math.max(1, s.maxConcurrency);
  const demand = Math.ceil((s.queued + s.inProgress) / concurrency);
  const want = Math.min(s.workersMax, Math.max(s.workersMin, demand));
  let start = 0;
  if (current.length < want && s.now >= s.backoffUntil) start = want - current.length;
  if (current.length + start > 0) {
    for (const w of old) if (w.state === "running") drain.push(w.id);
  }
  if (s.queued === 0) {
    let surplus = current.length - Math.max(s.workersMin, demand);
    const idle = current.filter((w) => w.state === "idle" && s.now - w.idleSince >= s.idleTimeoutMs).sort((a, b) => a.idleSince - b.idleSince);
    for (const w of idle) {
      if (surplus <= 0) break;
      drain.push(w.id);
      surplus--;
    }
  }
  return { start, drain };
}
var BACKOFF_BASE_MS = 500;
var BACKOFF_MAX_MS = 3e4;
var DRAIN_GRACE_MS = 5e3;
var Scaler = class {
  constructor(deps, intervalMs = 250) {
    this.deps = deps;
    this.intervalMs = intervalMs;
  }
  deps;
  intervalMs;
  managed = /* @__PURE__ */ new Map();
  failures = /* @__PURE__ */ new Map();
  coldStartPending = /* @__PURE__ */ new Map();
  coldStarts = /* @__PURE__ */ new Map();
  timer;
  closed = false;
  planning = false;
  kickPending = false;
  start() {
    this.timer = setInterval(() => this.reconcile(), this.intervalMs);
    this.timer.unref();
  }
  /** Jobs wait on this endpoint: plan now rather than at the next interval. */
  kick(_endpointId) {
    if (this.kickPending || this.closed) return;
    this.kickPending = true;
    setImmediate(() => {
      this.kickPending = false;
      this.reconcile();
    });
  }
  /** The first job of an endpoint with no worker was taken: that was a cold start. */
  taken(endpointId2) {
    const since = this.coldStartPending.get(endpointId2);
    if (since === void 0) return;
    this.coldStartPending.delete(endpointId2);
    const entry = this.coldStarts.get(endpointId2) ?? { count: 0, lastMs: null };
    entry.count++;
    entry.lastMs = Date.now() - since;
    this.coldStarts.set(endpointId2, entry);
  }
  reconcile() {
    if (this.closed || this.planning) return;
    this.planning = true;
    try {
      const now = Date.now();
      const { engine } = this.deps;
      const liveEndpoints = /* @__PURE__ */ new Set();
      for (const endpoint of this.deps.endpoints()) {
        liveEndpoints.add(endpoint.id);
        if (endpoint.type !== "queue") continue;
        const workers = [...this.managed.values()].filter((m) => m.endpointId === endpoint.id && !m.stopping);
        const plan = planScaling({
          workersMin: endpoint.resource.workersMin,
          workersMax: endpoint.resource.workersMax,
          maxConcurrency: endpoint.resource.maxConcurrency,
          idleTimeoutMs: endpoint.resource.idleTimeout * 1e3,
          queued: engine.queuedCount(endpoint.id),
          inProgress: engine.runningCount(endpoint.id),
          revision: endpoint.revision,
          workers: workers.map((m) => {
            const entry = engine.workers.get(m.id);
            return {
              id: m.id,
              revision: m.revision,
              state: entry ? workerState(entry) : "initializing",
              idleSince: entry?.idleSince ?? now
            };
          }),
          now,
          backoffUntil: this.failures.get(endpoint.id)?.until ?? 0
        });
        if (plan.start > 0 && workers.length === 0 && engine.queuedCount(endpoint.id) > 0 && !this.coldStartPending.has(endpoint.id)) {
          this.coldStartPending.set(endpoint.id, now);
        }
        for (let i = 0; i < plan.start; i++) void this.launch(endpoint);
        for (const id2 of plan.drain) this.drain(id2);
      }
      for (const m of this.managed.values()) if (!liveEndpoints.has(m.endpointId)) this.drain(m.id);
      this.stopDrainedWorkers(now);
    } finally {
      this.planning = false;
    }
  }
  drainedSince = /* @__PURE__ */ new Map();
  drain(workerId) {
    const m = this.managed.get(workerId);
    if (!m || m.stopping) return;
    m.stopping = true;
    this.drainedSince.set(workerId, Date.now());
    this.deps.engine.ensureWorker(workerId, m.endpointId, true);
    this.deps.engine.drain(workerId);
  }
  /** Draining workers that hold nothing are stopped through the driver after a grace period. */
  stopDrainedWorkers(now) {
    for (const [id2, since] of this.drainedSince) {
      const m = this.managed.get(id2);
      if (!m) {
        this.drainedSince.delete(id2);
        continue;
      }
      const entry = this.deps.engine.workers.get(id2);
      const busy = entry !== void 0 && entry.held.size > 0;
      if (!busy && now - since >= DRAIN_GRACE_MS && m.handle) {
        this.drainedSince.delete(id2);
        void m.handle.stop(DRAIN_GRACE_MS).catch(() => void 0);
      }
    }
  }
  async launch(endpoint) {
    const workerId = `w${Math.random().toString(36).slice(2, 10)}${Date.now().toString(36)}`;
    const m = { id: workerId, endpointId: endpoint.id, revision: endpoint.revision, stopping: false };
    this.managed.set(workerId, m);
    const entry = this.deps.engine.ensureWorker(workerId, endpoint.id, true);
    entry.managed = true;
    try {
      const keys = await this.deps.mintWorkerKeys(endpoint, workerId);
      const r = endpoint.resource;
      m.handle = await this.deps.driver.start({
        workerId,
        endpointId: endpoint.id,
        endpointName: endpoint.name,
        app: endpoint.app,
        env: endpoint.env,
        artifactPath: endpoint.artifactPath,
        apiUrl: this.deps.apiUrl,
        workerToken: keys.workerToken,
        apiKey: keys.apiKey,
        environment: { ...r.env },
        maxConcurrency: r.maxConcurrency,
        computeType: r.computeType,
        gpuTypeIds: r.gpuTypeIds,
        volumePath: this.deps.volumePath?.(endpoint),
        onLog: (line) => this.deps.onLog(endpoint.id, workerId, line)
      });
      this.deps.onEvent?.(`worker ${workerId} started for endpoint ${endpoint.name} (${endpoint.id})`);
    } catch (err) {
      this.deps.onLog(endpoint.id, workerId, { ts: Date.now(), stream: "stderr", text: `worker failed to start: ${err.message}` });
      this.exited(m, false);
      return;
    }
    void m.handle.exited.then((exit) => {
      const expected = m.stopping || this.closed;
      if (!expected) {
        this.deps.onLog(endpoint.id, workerId, {
          ts: Date.now(),
          stream: "stderr",
          text: `worker exited unexpectedly (code ${exit.code}, signal ${exit.signal})`
        });
      }
      this.exited(m, expected);
    });
  }
  exited(m, expected) {
    this.managed.delete(m.id);
    this.drainedSince.delete(m.id);
    const entry = this.deps.engine.workers.get(m.id);
    const registered = entry?.registered ?? false;
    this.deps.engine.workerGone(m.id);
    void this.deps.revokeWorkerKeys(m.id).catch(() => void 0);
    if (expected) return;
    const f = this.failures.get(m.endpointId) ?? { count: 0, until: 0 };
    f.count = registered ? 1 : f.count + 1;
    f.until = Date.now() + Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** (f.count - 1));
    this.failures.set(m.endpointId, f);
  }
  /** A worker registered: its endpoint starts fine, forget the backoff. */
  registered(endpointId2) {
    this.failures.delete(endpointId2);
  }
  workerRevision(workerId) {
    return this.managed.get(workerId)?.revision;
  }
  async close() {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    const handles = [...this.managed.values()];
    for (const m of handles) {
      m.stopping = true;
      this.deps.engine.drain(m.id);
    }
    await Promise.all(handles.map((m) => m.handle?.stop(3e3).catch(() => void 0)));
    await this.deps.driver.close().catch(() => void 0);
  }
};

// src/service/store/sqlite.ts
import Database from "better-sqlite3";
import { mkdirSync } from "node:fs";
import { dirname as dirname2 } from "node:path";
var MIGRATIONS = [
  `CREATE TABLE endpoints (
     id TEXT PRIMARY KEY, user_id TEXT NOT NULL, app TEXT NOT NULL, env TEXT NOT NULL, name TEXT NOT NULL,
     type TEXT NOT NULL, resource TEXT NOT NULL, artifact_path TEXT NOT NULL, revision TEXT NOT NULL,
     created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,
     completed INTEGER NOT NULL DEFAULT 0, failed INTEGER NOT NULL DEFAULT 0, retried INTEGER NOT NULL DEFAULT 0);
   CREATE INDEX endpoints_app_env ON endpoints (user_id, app, env);
   CREATE TABLE jobs (
     seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, endpoint_id TEXT NOT NULL,
     status TEXT NOT NULL, input TEXT NOT NULL, function TEXT, webhook TEXT, sync INTEGER NOT NULL,
     low_priority INTEGER NOT NULL, created_at INTEGER NOT NULL, started_at INTEGER, completed_at INTEGER,
     output TEXT, error TEXT, error_type TEXT, error_stack TEXT, attempt INTEGER NOT NULL, retried INTEGER NOT NULL,
     execution_timeout_ms INTEGER, ttl_ms INTEGER NOT NULL, expires_at INTEGER, lease TEXT, worker_id TEXT,
     stream_cursor INTEGER NOT NULL DEFAULT 0);
   CREATE INDEX jobs_active ON jobs (status) WHERE status IN ('IN_QUEUE', 'IN_PROGRESS');
   CREATE INDEX jobs_expires ON jobs (expires_at) WHERE expires_at IS NOT NULL;
   CREATE INDEX jobs_endpoint ON jobs (endpoint_id);
   CREATE TABLE stream_chunks (job_id TEXT NOT NULL, seq INTEGER NOT NULL, data TEXT NOT NULL, PRIMARY KEY (job_id, seq));
   CREATE TABLE logs (
     seq INTEGER PRIMARY KEY AUTOINCREMENT, endpoint_id TEXT NOT NULL, worker_id TEXT NOT NULL, job_id TEXT,
     ts INTEGER NOT NULL, stream TEXT NOT NULL, text TEXT NOT NULL);
   CREATE INDEX logs_endpoint ON logs (endpoint_id, seq);
   CREATE INDEX logs_job ON logs (job_id, seq) WHERE job_id IS NOT NULL;
   CREATE TABLE api_keys (
     id TEXT PRIMARY KEY, hash TEXT NOT NULL UNIQUE, user_id TEXT NOT NULL, scopes TEXT NOT NULL,
     created_at INTEGER NOT NULL, revoked_at INTEGER);`
];
var JOB_COLUMNS = {
  id: "id",
  endpointId: "endpoint_id",
  status: "status",
  input: "input",
  function: "function",
  webhook: "webhook",
  sync: "sync",
  lowPriority: "low_priority",
  createdAt: "created_at",
  startedAt: "started_at",
  completedAt: "completed_at",
  output: "output",
  error: "error",
  errorType: "error_type",
  errorStack: "error_stack",
  attempt: "attempt",
  retried: "retried",
  executionTimeoutMs: "execution_timeout_ms",
  ttlMs: "ttl_ms",
  expiresAt: "expires_at",
  lease: "lease",
  workerId: "worker_id",
  streamCursor: "stream_cursor"
};
var JOB_KEYS = Object.keys(JOB_COLUMNS);
var toSql = (v) => typeof v === "boolean" ? v ? 1 : 0 : v ?? null;
function rowToJob(r) {
  const job = {};
  for (const key of JOB_KEYS) job[key] = r[JOB_COLUMNS[key]];
  job.sync = r.sync === 1;
  job.lowPriority = r.low_priority === 1;
  return job;
}
function rowToEndpoint(r) {
  return {
    id: r.id,
    userId: r.user_id,
    app: r.app,
    env: r.env,
    name: r.name,
    type: r.type,
    resource: JSON.parse(r.resource),
    artifactPath: r.artifact_path,
    revision: r.revision,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
    completed: r.completed,
    failed: r.failed,
    retried: r.retried
  };
}
function openSqliteStore(file) {
  mkdirSync(dirname2(file), { recursive: true });
  const db = new Database(file);
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = NORMAL");
  db.pragma("busy_timeout = 5000");
  migrate(db);
  const insertJob = db.prepare(
    `INSERT INTO jobs (${JOB_KEYS.map((k) => JOB_COLUMNS[k]).join(", ")}) VALUES (${JOB_KEYS.map(() => "?").join(", ")})`
  );
  const updateStatements = /* @__PURE__ */ new Map();
  const updateFor = (keys) => {
    const signature = keys.join(",");
    let statement = updateStatements.get(signature);
    if (!statement) {
      const sets = keys.map((k) => `${JOB_COLUMNS[k]} = ?`).join(", ");
      statement = db.prepare(`UPDATE jobs SET ${sets} WHERE id = ?`);
      updateStatements.set(signature, statement);
    }
    return statement;
  };
  const deleteJob = db.prepare("DELETE FROM jobs WHERE id = ?");
  const deleteChunks = db.prepare("DELETE FROM stream_chunks WHERE job_id = ?");
  const insertChunk = db.prepare("INSERT OR REPLACE INTO stream_chunks (job_id, seq, data) VALUES (?, ?, ?)");
  const insertLog = db.prepare("INSERT INTO logs (endpoint_id, worker_id, job_id, ts, stream, text) VALUES (?, ?, ?, ?, ?, ?)");
  const upsertEndpoint = db.prepare(
    `INSERT INTO endpoints (id, user_id, app, env, name, type, resource, artifact_path, revision, created_at, updated_at)
     VALUES (@id, @userId, @app, @env, @name, @type, @resource, @artifactPath, @revision, @createdAt, @updatedAt)
     ON CONFLICT (id) DO UPDATE SET type = excluded.type, resource = excluded.resource,
       artifact_path = excluded.artifact_path, revision = excluded.revision, updated_at = excluded.updated_at`
  );
  const deleteEndpoint = db.prepare("DELETE FROM endpoints WHERE id = ?");
  const deleteEndpointJobs = db.prepare("DELETE FROM jobs WHERE endpoint_id = ?");
  const deleteEndpointChunks = db.prepare(
    "DELETE FROM stream_chunks WHERE job_id IN (SELECT id FROM jobs WHERE endpoint_id = ?)"
  );
  const deleteEndpointLogs = db.prepare("DELETE FROM logs WHERE endpoint_id = ?");
  const addCounters = db.prepare(
    "UPDATE endpoints SET completed = completed + ?, failed = failed + ?, retried = retried + ? WHERE id = ?"
  );
  const insertKey = db.prepare(
    "INSERT OR REPLACE INTO api_keys (id, hash, user_id, scopes, created_at, revoked_at) VALUES (?, ?, ?, ?, ?, ?)"
  );
  const revokeKey = db.prepare("UPDATE api_keys SET revoked_at = ? WHERE id = ?");
  const deleteKey = db.prepare("DELETE FROM api_keys WHERE id = ?");
  const getJob = db.prepare("SELECT * FROM jobs WHERE id = ?");
  const activeJobs = db.prepare("SELECT * FROM jobs WHERE status IN ('IN_QUEUE', 'IN_PROGRESS') ORDER BY seq");
  const chunksAfter = db.prepare("SELECT job_id, seq, data FROM stream_chunks WHERE job_id = ? AND seq > ? ORDER BY seq");
  const lastChunk = db.prepare("SELECT COALESCE(MAX(seq), 0) AS seq FROM stream_chunks WHERE job_id = ?");
  const expired = db.prepare("SELECT id FROM jobs WHERE expires_at IS NOT NULL AND expires_at <= ? LIMIT 5000");
  const allEndpoints = db.prepare("SELECT * FROM endpoints ORDER BY created_at, id");
  const keyByHash = db.prepare("SELECT * FROM api_keys WHERE hash = ?");
  const applyOne = (o) => {
    switch (o.op) {
      case "insertJob":
        insertJob.run(JOB_KEYS.map((k) => toSql(o.job[k])));
        break;
      case "updateJob": {
        const keys = Object.keys(o.set);
        if (keys.length === 0) break;
        updateFor(keys).run([...keys.map((k) => toSql(o.set[k])), o.id]);
        break;
      }
      case "deleteJob":
        deleteChunks.run(o.id);
        deleteJob.run(o.id);
        break;
      case "insertChunk":
        insertChunk.run(o.chunk.jobId, o.chunk.seq, o.chunk.data);
        break;
      case "insertLog":
        insertLog.run(o.line.endpointId, o.line.workerId, o.line.jobId, o.line.ts, o.line.stream, o.line.text);
        break;
      case "upsertEndpoint":
        upsertEndpoint.run({ ...o.endpoint, resource: JSON.stringify(o.endpoint.resource) });
        break;
      case "deleteEndpoint":
        deleteEndpointChunks.run(o.id);
        deleteEndpointJobs.run(o.id);
        deleteEndpointLogs.run(o.id);
        deleteEndpoint.run(o.id);
        break;
      case "addCounters":
        addCounters.run(o.completed, o.failed, o.retried, o.endpointId);
        break;
      case "insertKey":
        insertKey.run(o.key.id, o.key.hash, o.key.userId, JSON.stringify(o.key.scopes), o.key.createdAt, o.key.revokedAt);
        break;
      case "revokeKey":
        revokeKey.run(o.at, o.id);
        break;
      case "deleteKey":
        deleteKey.run(o.id);
        break;
    }
  };
  const applyAll = db.transaction((ops) => {
    for (const o of ops) applyOne(o);
  });
  return {
    async apply(ops) {
      if (ops.length > 0) applyAll(ops);
    },
    async getJob(id2) {
      const r = getJob.get(id2);
      return r ? rowToJob(r) : void 0;
    },
    async activeJobs() {
      return activeJobs.all().map(rowToJob);
    },
    async chunksAfter(jobId, seq) {
      return chunksAfter.all(jobId, seq).map((r) => ({
        jobId: r.job_id,
        seq: r.seq,
        data: r.data
      }));
    },
    async lastChunkSeq(jobId) {
      return lastChunk.get(jobId).seq;
    },
    async deleteExpired(now) {
      const ids = expired.all(now).map((r) => r.id);
      if (ids.length > 0) applyAll(ids.map((id2) => ({ op: "deleteJob", id: id2 })));
      return ids;
    },
    async endpoints() {
      return allEndpoints.all().map(rowToEndpoint);
    },
    async keyByHash(hash) {
      const r = keyByHash.get(hash);
      if (!r) return void 0;
      return {
        id: r.id,
        hash: r.hash,
        userId: r.user_id,
        scopes: JSON.parse(r.scopes),
        createdAt: r.created_at,
        revokedAt: r.revoked_at ?? null
      };
    },
    async logs(q) {
      const where = ["endpoint_id = ?"];
      const params = [q.endpointId];
      if (q.jobId) {
        where.push("job_id = ?");
        params.push(q.jobId);
      }
      if (q.since !== void 0) {
        where.push("ts >= ?");
        params.push(q.since);
      }
      if (q.afterId !== void 0) {
        where.push("seq > ?");
        params.push(q.afterId);
      }
      params.push(q.limit);
      const rows = db.prepare(`SELECT * FROM logs WHERE ${where.join(" AND ")} ORDER BY seq LIMIT ?`).all(params);
      return rows.map((r) => ({
        seq: r.seq,
        ts: r.ts,
        endpointId: r.endpoint_id,
        workerId: r.worker_id,
        jobId: r.job_id ?? null,
        stream: r.stream,
        text: r.text
      }));
    },
    async close() {
      if (db.open) db.close();
    }
  };
}
function migrate(db) {
  const current = db.pragma("user_version", { simple: true });
  if (current > MIGRATIONS.length) {
    throw new Error(`The data file was written by a newer svc (schema ${current}, this svc knows ${MIGRATIONS.length})`);
  }
  for (let version = current; version < MIGRATIONS.length; version++) {
    db.transaction(() => {
      db.exec(MIGRATIONS[version]);
      db.pragma(`user_version = ${version + 1}`);
    })();
  }
}

// src/service/index.ts
function endpointId(userId, app, env, name) {
  return createHash3("sha256").update(`${userId}\0${app}\0${env}\0${name}`).digest("hex").slice(0, 16);
}
function engineEndpoint(row) {
  const r = row.resource;
  return {
    id: row.id,
    type: row.type,
    retries: r.retries,
    executionTimeoutMs: r.executionTimeoutMs,
    maxConcurrency: r.maxConcurrency,
    functions: r.functions.map((f) => f.name)
  };
}
var SCOPE_PATTERN = /^(admin|jobs:\*|jobs:[a-z0-9]+|worker:[a-z0-9]+)$/;
function hashFile(path) {
  return new Promise((resolve3, reject) => {
    const hash = createHash3("sha256");
    createReadStream2(path).on("data", (chunk) => hash.update(chunk)).on("error", reject).on("end", () => resolve3(hash.digest("hex")));
  });
}
function planDeploy(existing, input, now) {
  const mine = existing.filter((e) => e.userId === input.userId && e.app === input.app && e.env === input.env);
  const upsert = [];
  const changed = [];
  for (const [name, resource] of Object.entries(input.resources)) {
    const id2 = endpointId(input.userId, input.app, input.env, name);
    const revision = createHash3("sha256").update(JSON.stringify(resource)).update(input.artifactHash).digest("hex").slice(0, 16);
    const before = mine.find((e) => e.id === id2);
    if (before && before.revision !== revision) changed.push(id2);
    upsert.push({
      id: id2,
      userId: input.userId,
      app: input.app,
      env: input.env,
      name,
      type: resource.is_load_balanced ? "lb" : "queue",
      resource,
      artifactPath: input.artifactPath,
      revision,
      createdAt: before?.createdAt ?? now,
      updatedAt: before && before.revision === revision ? before.updatedAt : now,
      completed: before?.completed ?? 0,
      failed: before?.failed ?? 0,
      retried: before?.retried ?? 0
    });
  }
  const names = new Set(Object.keys(input.resources));
  const remove = mine.filter((e) => !names.has(e.name));
  return { upsert, remove, changed };
}
async function startService(options) {
  const leaseMs = options.leaseMs ?? 3e4;
  const heartbeatMs = options.heartbeatMs ?? Math.max(50, Math.min(5e3, Math.floor(leaseMs / 3)));
  const log = options.log ?? (() => void 0);
  const store = openSqliteStore(join3(options.dataDir, "svc.sqlite"));
  const keyring = new KeyRing(store);
  const endpoints = /* @__PURE__ */ new Map();
  for (const row of await store.endpoints()) endpoints.set(row.id, row);
  let scaler;
  const webhooks = /* @__PURE__ */ new Set();
  const engine = new JobEngine(
    store,
    { leaseMs, heartbeatMs },
    {
      onDemand: (id2) => scaler?.kick(id2),
      onTaken: (id2) => scaler?.taken(id2),
      onFinal: (row) => {
        if (!row.webhook) return;
        const delivery = deliverWebhook(row.webhook, recordJson(row, Date.now()), log).finally(() => webhooks.delete(delivery));
        webhooks.add(delivery);
      }
    }
  );
  for (const row of endpoints.values()) engine.endpoints.set(row.id, engineEndpoint(row));
  await engine.load([...endpoints.values()]);
  if (options.apiKeys?.length) {
    const now = Date.now();
    await engine.write(
      options.apiKeys.map((key) => {
        const hash = hashKey(key);
        return { op: "insertKey", key: { id: `k${hash.slice(0, 15)}`, hash, userId: DEFAULT_USER, scopes: ["admin"], createdAt: now, revokedAt: null } };
      })
    );
  }
  const mintKey = async (opts) => {
    const bad = opts.scopes.filter((s) => !SCOPE_PATTERN.test(s));
    if (opts.scopes.length === 0 || bad.length > 0) {
      throw new UserError("Invalid key scopes", { problems: bad.map((s) => `unknown scope "${s}"`), hint: "Scopes: admin, jobs:*, jobs:<endpointId>, worker:<endpointId>." });
    }
    const worker = opts.scopes.some((s) => s.startsWith("worker:"));
    const id2 = newId(8);
    const key = newKey(worker ? "svcw" : "svc");
    await engine.write([{ op: "insertKey", key: { id: id2, hash: hashKey(key), userId: opts.userId ?? DEFAULT_USER, scopes: opts.scopes, createdAt: Date.now(), revokedAt: null } }]);
    keyring.forget();
    return { id: id2, key };
  };
  const server = createServer();
  server.keepAliveTimeout = 65e3;
  server.headersTimeout = 7e4;
  const host = options.host ?? "127.0.0.1";
  await new Promise((resolve3, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, host, () => {
      server.off("error", reject);
      resolve3();
    });
  });
  const port = server.address().port;
  const localHost = host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host.includes(":") ? `[${host}]` : host;
  const localUrl = `http://${localHost}:${port}`;
  const url = (options.publicUrl ?? localUrl).replace(/\/+$/, "");
  if (options.driver) {
    const workerKeys = /* @__PURE__ */ new Map();
    scaler = new Scaler({
      engine,
      driver: options.driver,
      apiUrl: localUrl,
      endpoints: () => endpoints.values(),
      mintWorkerKeys: async (endpoint, workerId) => {
        const token = newKey("svcw");
        const apiKey = newKey("svc");
        const apiKeyId = `${workerId}-api`;
        const now = Date.now();
        await engine.write([
          { op: "insertKey", key: { id: workerId, hash: hashKey(token), userId: endpoint.userId, scopes: [`worker:${endpoint.id}`], createdAt: now, revokedAt: null } },
          { op: "insertKey", key: { id: apiKeyId, hash: hashKey(apiKey), userId: endpoint.userId, scopes: ["jobs:*"], createdAt: now, revokedAt: null } }
        ]);
        workerKeys.set(workerId, [workerId, apiKeyId]);
        keyring.forget();
        return { workerToken: token, apiKey };
      },
      revokeWorkerKeys: async (workerId) => {
        const ids = workerKeys.get(workerId) ?? [];
        workerKeys.delete(workerId);
        await engine.write(ids.map((id2) => ({ op: "deleteKey", id: id2 })));
        keyring.forget();
      },
      volumePath: (endpoint) => endpoint.resource.volume ? join3(options.dataDir, "volumes", endpoint.resource.volume) : void 0,
      onLog: (endpointId2, workerId, line) => {
        void engine.appendLogs([{ ts: line.ts, endpointId: endpointId2, workerId, jobId: null, stream: line.stream, text: line.text.slice(0, 64 * 1024) }]).catch(() => void 0);
      },
      onEvent: log
    });
    scaler.start();
  }
  const followers = /* @__PURE__ */ new Set();
  const context = { engine, keyring, endpoints, url, scaler: () => scaler, followers, log, leaseMs, heartbeatMs };
  server.on("request", (req, res) => {
    handleRequest(context, req, res).catch((err) => {
      log(`internal error on ${req.method} ${req.url}: ${err.stack ?? String(err)}`);
      sendProblem(res, 500, "The service failed to handle this request");
    });
  });
  const tickMs = Math.max(20, Math.min(250, Math.floor(leaseMs / 4)));
  const ticker = setInterval(() => {
    engine.tick();
    const now = Date.now();
    for (const w of engine.workers.values()) {
      if (!w.managed && w.polling === 0 && w.held.size === 0 && now - w.lastSeen > Math.max(3 * leaseMs, 6e4)) engine.workerGone(w.id);
    }
  }, tickMs);
  ticker.unref();
  const sweeper = setInterval(() => {
    engine.sweep().catch((err) => log(`retention sweep failed: ${err.message}`));
  }, options.retentionSweepMs ?? 1e4);
  sweeper.unref();
  let closing;
  const close = () => closing ??= (async () => {
    clearInterval(ticker);
    clearInterval(sweeper);
    await scaler?.close();
    await engine.close();
    for (const res of followers) res.end();
    await new Promise((resolve3) => {
      server.close(() => resolve3());
      server.closeIdleConnections();
      setTimeout(() => server.closeAllConnections(), 200).unref();
    });
    await Promise.race([Promise.allSettled([...webhooks]), new Promise((r) => setTimeout(r, 1e3).unref())]);
    await store.close();
  })();
  return {
    url,
    port,
    close,
    mintKey,
    async deploy(input) {
      let userId = DEFAULT_USER;
      if (input.ownerKey) {
        const principal = await keyring.authenticate(input.ownerKey);
        if (!principal || principal.worker) throw new UserError("The owner key of this deploy is not a valid API key");
        userId = principal.userId;
      }
      const artifactHash = await hashFile(input.artifactPath);
      const artifactPath = await keepArtifact(options.dataDir, input.artifactPath, artifactHash);
      const plan = planDeploy([...endpoints.values()], { userId, app: input.app, env: input.env, resources: input.manifest.resources, artifactPath, artifactHash }, Date.now());
      for (const row of plan.remove) {
        endpoints.delete(row.id);
        await engine.dropEndpoint(row.id);
      }
      await engine.write(plan.upsert.map((endpoint) => ({ op: "upsertEndpoint", endpoint })));
      for (const row of plan.upsert) {
        const previous = endpoints.get(row.id);
        endpoints.set(row.id, previous ? { ...row, completed: previous.completed, failed: previous.failed, retried: previous.retried } : row);
        engine.endpoints.set(row.id, engineEndpoint(row));
      }
      scaler?.reconcile();
      return plan.upsert.map((row) => ({ id: row.id, name: row.name, app: row.app, env: row.env, url: `${url}/v2/${row.id}`, type: row.type }));
    }
  };
}
async function keepArtifact(dataDir, source, sha256) {
  const dir = join3(dataDir, "artifacts");
  const target = join3(dir, `${sha256}.tar.gz`);
  if (existsSync2(target)) return target;
  await mkdir2(dir, { recursive: true });
  const temp = `${target}.${process.pid}.${Date.now()}.tmp`;
  await copyFile(source, temp);
  await rename2(temp, target);
  return target;
}
async function deliverWebhook(target, body, log) {
  const delays = [0, 250, 1e3, 4e3];
  for (let attempt = 0; attempt < delays.length; attempt++) {
    if (delays[attempt]) await new Promise((r) => setTimeout(r, delays[attempt]).unref());
    try {
      const response = await fetch(target, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body,
        signal: AbortSignal.timeout(1e4)
      });
      await response.arrayBuffer().catch(() => void 0);
      if (response.ok) return;
    } catch {
    }
  }
  log(`webhook ${target} failed after ${delays.length} attempts`);
}

// test/runtime/artifact.ts
import { writeFile } from "node:fs/promises";
import { join as join4, resolve as resolve2 } from "node:path";
import { gzipSync } from "node:zlib";
import { fileURLToPath as fileURLToPath2 } from "node:url";
import * as esbuild from "esbuild";
import tarStream2 from "tar-stream";

// src/build/handlers.ts
import { posix } from "node:path";
var HANDLERS_DIR = ".svc/.build/handlers";
var isMethod = (kind) => kind === "method" || kind === "generator-method";
function moduleSpecifier(module, fromDir = HANDLERS_DIR) {
  const rel = posix.relative(fromDir, module);
  return rel.startsWith(".") ? rel : `./${rel}`;
}
function generateHandlerSource(endpoint, fromDir = HANDLERS_DIR) {
  const modules = [
    .../* @__PURE__ */ new Set([...endpoint.functions.map((f) => f.module), ...endpoint.lbExport ? [endpoint.lbExport.module] : []])
  ].sort();
  const alias = new Map(modules.map((m, i) => [m, `m${i}`]));
  const ref = (module, exportName) => `${alias.get(module)}[${JSON.stringify(exportName)}]`;
  const routeModules = [...new Set((endpoint.routes ?? []).map((r) => r.loc.file))].filter((m) => !alias.has(m)).sort();
  const lines = [
    `// Generated by \`svc build\` for endpoint ${JSON.stringify(endpoint.name)}. Do not edit.`,
    ...modules.map((m) => `import * as ${alias.get(m)} from ${JSON.stringify(moduleSpecifier(m, fromDir))};`),
    ...routeModules.map((m) => `import ${JSON.stringify(moduleSpecifier(m, fromDir))};`),
    `import { __defineHandler } from "svc";`,
    "",
    "export default __defineHandler({",
    `  endpoint: ${JSON.stringify(endpoint.name)},`,
    `  kind: ${JSON.stringify(endpoint.type)},`
  ];
  if (endpoint.type === "lb") {
    if (!endpoint.lbExport) throw new Error(`load-balanced endpoint ${endpoint.name} has no definition export`);
    lines.push(`  lb: ${ref(endpoint.lbExport.module, endpoint.lbExport.exportName)},`);
  }
  lines.push("  functions: [");
  for (const f of endpoint.functions) {
    const name = JSON.stringify(f.name);
    const kind = JSON.stringify(f.kind);
    lines.push(
      isMethod(f.kind) ? `    { name: ${name}, kind: ${kind}, classRef: ${ref(f.module, f.exportName)}, method: ${name} },` : `    { name: ${name}, kind: ${kind}, ref: ${ref(f.module, f.exportName)} },`
    );
  }
  lines.push("  ],", "});", "");
  return lines.join("\n");
}

// test/runtime/artifact.ts
var REPO = resolve2(fileURLToPath2(new URL("../..", "file:///work/main/test/runtime/artifact.ts")));
var SDK_ENTRY = join4(REPO, "dist/sdk/index.js");
var RUNTIME_ENTRY = join4(REPO, "dist/runtime/worker.js");
var FIXTURE = join4(REPO, "fixtures/runtime-basic");
var kindOf = (name) => ["count", "ticker"].includes(name) ? "generator" : "function";
var FIXTURE_ENDPOINTS = [
  {
    name: "fns",
    type: "queue",
    functions: ["add", "upper", "fail", "count", "nap", "ticker", "say"].map((name) => ({
      name,
      exportName: name,
      module: "src/work.ts",
      kind: kindOf(name)
    }))
  },
  { name: "single", type: "queue", functions: [{ name: "echo", exportName: "echo", module: "src/work.ts", kind: "function" }] },
  {
    name: "counter",
    type: "queue",
    functions: ["hit", "hitTwice"].map((name) => ({ name, exportName: "Counter", module: "src/work.ts", kind: "method", className: "Counter" }))
  }
];
async function tarGz(files) {
  const pack = tarStream2.pack();
  const chunks = [];
  const collected = (async () => {
    for await (const chunk of pack) chunks.push(chunk);
  })();
  for (const f of files) {
    const body = Buffer.isBuffer(f.body) ? f.body : Buffer.from(f.body);
    await new Promise((res, rej) => pack.entry({ name: f.name, size: body.length, mode: 420 }, body, (e) => e ? rej(e) : res()));
  }
  pack.finalize();
  await collected;
  return gzipSync(Buffer.concat(chunks));
}
function resourceFor(endpoint, handler, overrides = {}) {
  return {
    is_load_balanced: endpoint.type === "lb",
    imageName: "svc-node20",
    workersMin: 0,
    workersMax: 1,
    gpuIds: "",
    env: {},
    functions: endpoint.functions.map((f) => ({ name: f.name, module: f.module, export: f.exportName, kind: f.kind, ...f.className ? { class: f.className } : {} })),
    computeType: "CPU",
    gpuTypeIds: [],
    instanceIds: ["cpu3c-1-2"],
    dependencies: [],
    idleTimeout: 5,
    executionTimeoutMs: 6e5,
    maxConcurrency: 1,
    retries: 0,
    volume: null,
    handler,
    ...overrides
  };
}
async function buildTestArtifact(outFile, overrides = {}, root = FIXTURE, endpoints = FIXTURE_ENDPOINTS) {
  const files = [];
  const resources = {};
  for (const endpoint of endpoints) {
    const result = await esbuild.build({
      stdin: { contents: generateHandlerSource(endpoint, "."), resolveDir: root, loader: "ts", sourcefile: `${endpoint.name}.handler.ts` },
      bundle: true,
      write: false,
      platform: "node",
      format: "esm",
      target: "node20",
      alias: { svc: SDK_ENTRY },
      logLevel: "silent"
    });
    const handler = `endpoints/${endpoint.name}/handler.mjs`;
    files.push({ name: handler, body: Buffer.from(result.outputFiles[0].contents) });
    resources[endpoint.name] = resourceFor(endpoint, handler, overrides[endpoint.name]);
  }
  const manifest = {
    version: 1,
    app: "runtime-basic",
    fingerprint: "test",
    svcVersion: "test",
    resources,
    routes: {},
    excluded: []
  };
  files.unshift({ name: "svc_manifest.json", body: JSON.stringify(manifest, null, 2) });
  await writeFile(outFile, await tarGz(files));
  return { path: outFile, manifest };
}

// ../../tmp/h4scratch/svc2.mts
var work = await mkdtemp(join5(tmpdir2(), "svc-dbg-"));
var artifact = await buildTestArtifact(join5(work, "a.tar.gz"), { fns: { workersMin: 1, workersMax: 1, maxConcurrency: 3 } });
var driver = createProcessDriver({ cacheDir: join5(work, "cache"), runtimeEntry: "/work/main/dist/runtime/worker.js" });
var service = await startService({ dataDir: join5(work, "data"), driver, apiKeys: ["k_0123456789abcdef"], leaseMs: 2e3, log: (m) => console.log("SVC", m) });
var deployed = await service.deploy({ app: "rt", env: "test", manifest: artifact.manifest, artifactPath: artifact.path });
var c = new JobsClient(deployed.find((d) => d.name === "fns").url, "k_0123456789abcdef");
var { id } = await c.run({ count: 5, delayMs: 400 }, { function: "count" });
for (let i = 0; i < 12; i++) {
  await new Promise((r) => setTimeout(r, 250));
  console.log(JSON.stringify(await c.stream(id)).slice(0, 300));
}
await service.close();
await driver.close();
