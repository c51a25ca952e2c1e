// The servers users would run instead of svc's parts, started by the benches (and their smoke test) from
// Debian's packages, each on a free port of 127.0.0.1 with its configuration in a temporary directory of its own,
// never as a system service: nginx and HAProxy in front of an HTTP server, Redis for BullMQ.
//
// Each start* resolves to `{ url | port, stop() }` once the server accepts connections, or rejects with an Error
// whose message says why it could not start (not installed, refused its configuration, exited): the benches
// print that as the peer's row.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { connect, createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const NGINX = "/usr/sbin/nginx";
export const HAPROXY = "/usr/sbin/haproxy";
export const REDIS = "/usr/bin/redis-server";

/** Why `binary` cannot be run here (with the Debian package that provides it), or undefined when it can. */
export function missing(binary, debianPackage) {
  return existsSync(binary) ? undefined : `${binary} is not installed (Debian: apt-get install ${debianPackage})`;
}

export async function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** Resolves once something accepts TCP connections on 127.0.0.1:`port`; rejects when `child` exits first. */
async function listening(port, child, name, logFile, timeoutMs = 15_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`${name} exited (${child.exitCode ?? child.signalCode}): ${tail(logFile, child)}`);
    const open = await new Promise((resolve) => {
      const socket = connect(port, "127.0.0.1");
      socket.once("connect", () => (socket.destroy(), resolve(true)));
      socket.once("error", () => resolve(false));
    });
    if (open) return;
    if (Date.now() > deadline) throw new Error(`${name} did not listen on 127.0.0.1:${port} within ${timeoutMs} ms: ${tail(logFile, child)}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

function tail(logFile, child) {
  const fromFile = logFile && existsSync(logFile) ? readFileSync(logFile, "utf8") : "";
  const text = `${fromFile}${child.output ?? ""}`.trim();
  return text ? text.split("\n").slice(-5).join(" / ").slice(0, 400) : "no output";
}

/** Runs `binary args` in the foreground (its output kept for errors); `stop()` ends it and removes `dir`. */
async function supervise({ name, binary, args, port, dir, logFile }) {
  const child = spawn(binary, args, { stdio: ["ignore", "pipe", "pipe"], cwd: dir });
  child.output = "";
  const keep = (d) => {
    child.output = (child.output + d).slice(-4000);
  };
  child.stdout.on("data", keep);
  child.stderr.on("data", keep);
  const exited = new Promise((resolve) => child.once("exit", resolve));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await listening(port, child, name, logFile);
  } catch (err) {
    await stop();
    throw err;
  }
  return { child, stop };
}

/**
 * nginx as a reverse proxy in front of `upstream` (http://host:port), with the settings its documentation gives
 * for keep-alive upstream connections (`keepalive` in the upstream block, HTTP/1.1 and an empty Connection
 * header), access log off, response buffering on (its default), one worker process: svc serves on one event loop.
 */
export async function startNginx(upstream, { workers = 1, keepalive = 64, binary = NGINX, location = "" } = {}) {
  const why = missing(binary, "nginx-light");
  if (why) throw new Error(why);
  const { hostname: host, port: upstreamPort } = new URL(upstream);
  const dir = mkdtempSync(join(tmpdir(), "svc-bench-nginx-"));
  const port = await freePort();
  for (const sub of ["body", "proxy", "fastcgi", "uwsgi", "scgi"]) mkdirSync(join(dir, sub));
  const conf = `
worker_processes ${workers};
daemon off;
master_process on;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  keepalive_requests 100000;
  upstream app {
    server ${host}:${upstreamPort};
    keepalive ${keepalive};
    keepalive_requests 100000;
  }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://app;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      ${location}
    }
  }
}
`;
  const confFile = join(dir, "nginx.conf");
  writeFileSync(confFile, conf);
  // -e: where it logs before it reads its own error_log (Debian's default is /var/log/nginx, maybe absent).
  const { stop } = await supervise({
    name: "nginx",
    binary,
    args: ["-c", confFile, "-p", dir, "-e", join(dir, "error.log")],
    port,
    dir,
    logFile: join(dir, "error.log"),
  });
  return {
    name: "nginx",
    url: `http://127.0.0.1:${port}`,
    settings: `worker_processes ${workers}, upstream keepalive ${keepalive}, proxy_http_version 1.1, buffering on`,
    stop,
  };
}

/**
 * HAProxy in HTTP mode in front of `upstream`, with its defaults for keep-alive (`option http-keep-alive`, idle
 * server connections reused: `http-reuse safe`), one thread as svc has one event loop.
 */
export async function startHaproxy(upstream, { threads = 1, binary = HAPROXY } = {}) {
  const why = missing(binary, "haproxy");
  if (why) throw new Error(why);
  const { hostname: host, port: upstreamPort } = new URL(upstream);
  const dir = mkdtempSync(join(tmpdir(), "svc-bench-haproxy-"));
  const port = await freePort();
  const conf = `
global
  nbthread ${threads}
  maxconn 4096
defaults
  mode http
  option http-keep-alive
  http-reuse safe
  timeout connect 5s
  timeout client 60s
  timeout server 60s
frontend front
  bind 127.0.0.1:${port}
  default_backend app
backend app
  server app1 ${host}:${upstreamPort}
`;
  const confFile = join(dir, "haproxy.cfg");
  writeFileSync(confFile, conf);
  // -db: foreground, no daemon; -W off (no master): SIGTERM ends it.
  const { stop } = await supervise({ name: "haproxy", binary, args: ["-db", "-f", confFile], port, dir });
  return { name: "HAProxy", url: `http://127.0.0.1:${port}`, settings: `nbthread ${threads}, option http-keep-alive, http-reuse safe`, stop };
}

/**
 * redis-server with Debian's defaults for persistence (RDB snapshots, no AOF) and BullMQ's one required setting,
 * `maxmemory-policy noeviction`.
 */
export async function startRedis({ binary = REDIS } = {}) {
  const why = missing(binary, "redis-server");
  if (why) throw new Error(why);
  const dir = mkdtempSync(join(tmpdir(), "svc-bench-redis-"));
  const port = await freePort();
  const args = [
    "--port",
    String(port),
    "--bind",
    "127.0.0.1",
    "--dir",
    dir,
    "--daemonize",
    "no",
    "--maxmemory-policy",
    "noeviction",
    "--protected-mode",
    "yes",
    "--logfile",
    "",
  ];
  const { stop } = await supervise({ name: "redis-server", binary, args, port, dir });
  return { name: "Redis", port, url: `redis://127.0.0.1:${port}`, settings: "RDB snapshots (default), no AOF, maxmemory-policy noeviction", stop };
}

/** The installed version of a binary, for the notes (first line of its version output). */
export function versionOf(binary, flag = "-v") {
  const r = spawnSync(binary, [flag], { encoding: "utf8" });
  return `${r.stdout ?? ""}${r.stderr ?? ""}`.split("\n")[0].trim();
}
