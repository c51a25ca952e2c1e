#!/usr/bin/env node
// Where the service's main thread spends its time under the peer benches' loads: the service runs in a process
// of its own under `node --cpu-prof`, the same load client as the benches drives it, and the profile's top
// self-time functions are printed (docs/performance.md holds what they said), then the CPU time of every process
// of the load (the service, its workers, the load client): on a machine of few cores the rate is bounded by their
// sum, and the profile's "busy" time also counts the main thread descheduled inside a syscall.
//
//   node bench/profile.mjs lb [--top 25] [--keep DIR]      1 MB answers through the LB front, 16 connections
//   node bench/profile.mjs lb-small                        small JSON through the LB front, 64 connections
//   node bench/profile.mjs queue                           /run end to end on SQLite, 16 submitters
//   node bench/profile.mjs queue --metrics off             the same with SVC_METRICS=off (what metrics cost)
//   node bench/profile.mjs queue-pg                        /run end to end on a throwaway PostgreSQL (fsync on)
//
// Needs `npm run build` first. --keep DIR keeps the .cpuprofile (open it in Chrome's DevTools).
import { execFile, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const run_ = promisify(execFile);
/** Linux's USER_HZ: the unit of utime and stime in /proc/<pid>/stat (100 on every common architecture). */
const CLOCK_TICKS = 100;
const root = fileURLToPath(new URL("..", import.meta.url));
const [mode = "lb", ...rest] = process.argv.slice(2);
const flag = (name, fallback) => {
  const i = rest.indexOf(name);
  return i >= 0 ? rest[i + 1] : fallback;
};

/** The profile's clock (µs of the monotonic clock node's hrtime reads) beside the epoch, to place the load in it. */
function clock() {
  return { epochMs: Date.now(), hrtimeUs: Number(process.hrtime.bigint() / 1000n) };
}

if (mode === "--child") {
  // The service's process: starts it (and, for the LB, the plain server as its worker), prints where to send
  // load as one JSON line, and exits when its stdin ends (so --cpu-prof writes the profile).
  const kind = rest[0];
  const { BENCH_KEY, startSvcLb, startSvcQueue } = await import("./svc-service.mjs");
  const work = mkdtempSync(join(tmpdir(), "svc-profile-"));
  const headers = { authorization: `Bearer ${BENCH_KEY}` };
  let service;
  let upstream;
  let postgres;
  let postgresPid;
  if (kind === "lb") {
    const { startPlainServerProcess } = await import("./http.mjs");
    upstream = await startPlainServerProcess();
    const started = await startSvcLb(upstream.url, work);
    service = started.service;
    process.stdout.write(`${JSON.stringify({ url: started.url, headers, clock: clock() })}\n`);
  } else {
    let storeUrl;
    if (kind === "queue-pg") {
      const { startPostgres } = await import("../scripts/throwaway-postgres.mjs");
      postgres = await startPostgres({ durable: true });
      storeUrl = await postgres.createDatabase("svc_profile");
      postgresPid = Number(readFileSync(join(postgres.dataDir, "postmaster.pid"), "utf8").split("\n")[0]);
    }
    const started = await startSvcQueue(work, { storeUrl, metrics: rest[1] !== "off" });
    service = started.service;
    process.stdout.write(`${JSON.stringify({ url: started.url, headers, clock: clock(), postgresPid })}\n`);
  }
  process.stdin.resume();
  process.stdin.on("end", async () => {
    await service.close();
    await upstream?.close();
    await postgres?.stop();
    rmSync(work, { recursive: true, force: true });
    process.exit(0);
  });
} else {
  const profiles = flag("--keep") ?? mkdtempSync(join(tmpdir(), "svc-cpuprof-"));
  const child = spawn(
    process.execPath,
    ["--cpu-prof", "--cpu-prof-dir", profiles, fileURLToPath(import.meta.url), "--child", mode.startsWith("queue") ? mode : "lb", flag("--metrics", "on")],
    { stdio: ["pipe", "pipe", "inherit"] },
  );
  const target = await new Promise((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (d) => {
      out += d;
      if (out.includes("\n")) resolve(JSON.parse(out.split("\n")[0]));
    });
    child.once("exit", (code) => reject(new Error(`the service's process exited (${code})`)));
  });
  const plans = {
    lb: {
      targets: [{ name: "svc", url: `${target.url}/bytes/${1 << 20}`, headers: target.headers, discard: true, expectBytes: 1 << 20 }],
      warmup: 50,
      total: 3000,
      concurrency: 16,
    },
    "lb-small": { targets: [{ name: "svc", url: `${target.url}/items/{i}`, headers: target.headers }], warmup: 200, total: 30000, concurrency: 64 },
    queue: {
      targets: [{ name: "svc", url: `${target.url}/run`, method: "POST", headers: target.headers, body: { input: { i: "{i}" } } }],
      warmup: 0,
      total: 30000,
      concurrency: 16,
    },
  };
  plans["queue-pg"] = { ...plans.queue, total: 20000 };
  // CPU time of every process of the load (the service, its workers, the load client), read from /proc while it
  // runs: on a machine of few cores the end-to-end rate is bounded by their sum, not by the service's alone.
  // The PostgreSQL server (queue-pg) is not the service's child: its own tree, named as one row.
  const trees = () => [
    ...processTree(child.pid),
    ...(target.postgresPid ? [...processTree(target.postgresPid)].map(([pid, p]) => [pid, { ...p, name: "postgres" }]) : []),
  ];
  const cpuBefore = new Map(trees());
  let cpuSeen = new Map(cpuBefore);
  const loadClient = run_(process.execPath, [join(root, "bench", "load-client.mjs"), JSON.stringify(plans[mode])], { maxBuffer: 1 << 20 });
  const watch = setInterval(() => {
    cpuSeen = new Map([...cpuSeen, ...trees(), ...processTree(loadClient.child.pid)]);
  }, 100);
  const { stdout } = await loadClient;
  const measured = JSON.parse(stdout).svc;
  const loadEndedAt = Date.now();
  if (mode.startsWith("queue")) {
    // The workers drain what was queued before the profile ends.
    for (;;) {
      const { request } = await import("./http.mjs");
      const health = JSON.parse((await request(`${target.url}/health`, { headers: target.headers })).body);
      if (health.jobs.inQueue === 0 && health.jobs.inProgress === 0) break;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  cpuSeen = new Map([...cpuSeen, ...trees()]);
  clearInterval(watch);
  await new Promise((resolve) => {
    child.once("exit", resolve);
    child.stdin.end();
  });
  const file = readdirSync(profiles).find((f) => f.endsWith(".cpuprofile"));
  // Only the samples taken under the load (from the client's start to its end, and the queue's draining): the
  // service's start (module loading, the build) is not what is measured.
  const toProfileUs = (epochMs) => target.clock.hrtimeUs + (epochMs - target.clock.epochMs) * 1000;
  const window = [toProfileUs(measured.startedAt), toProfileUs(loadEndedAt)];
  const { top, busyMs, windowMs } = summarize(JSON.parse(readFileSync(join(profiles, file), "utf8")), Number(flag("--top", 25)), window);
  const perRequest = (busyMs / plans[mode].targets.length / plans[mode].total) * 1000;
  console.log(
    `${mode}: ${measured.rps.toFixed(0)} req/s under the profiler; main thread busy ${busyMs.toFixed(0)} ms of ${windowMs.toFixed(0)} ms under load (${perRequest.toFixed(0)} µs a request); self time, top functions:\n`,
  );
  console.log("| self % | self ms | function | where |");
  console.log("|---:|---:|---|---|");
  for (const row of top) console.log(`| ${row.percent.toFixed(1)} | ${row.ms.toFixed(0)} | ${row.name} | ${row.where} |`);
  const requests = plans[mode].targets.length * plans[mode].total;
  console.log(`\nCPU time of each process over the load (user + system, from /proc; the service's includes the profiler's cost):\n`);
  console.log("| process | CPU ms | µs a request |");
  console.log("|---|---:|---:|");
  let sum = 0;
  const rows = new Map();
  for (const [pid, { name, ticks }] of cpuSeen) {
    const ms = (ticks - (cpuBefore.get(pid)?.ticks ?? 0)) * (1000 / CLOCK_TICKS);
    if (ms <= 0) continue;
    sum += ms;
    // PostgreSQL's processes (a backend a connection, the writers) as one row; every other process its own.
    const label = pid === child.pid ? "service" : name === "postgres" ? "postgres (all its processes)" : `${name} (${pid})`;
    rows.set(label, (rows.get(label) ?? 0) + ms);
  }
  for (const [label, ms] of rows) console.log(`| ${label} | ${ms.toFixed(0)} | ${((ms / requests) * 1000).toFixed(0)} |`);
  console.log(`| all | ${sum.toFixed(0)} | ${((sum / requests) * 1000).toFixed(0)} |`);
  if (!flag("--keep")) rmSync(profiles, { recursive: true, force: true });
  else console.log(`\nprofile: ${join(profiles, file)}`);
}

/** A process and its descendants: pid -> { name (its command line, short), ticks (user + system CPU so far) }. */
function processTree(rootPid) {
  const all = new Map();
  if (!existsSync("/proc/self/stat")) return all; // not Linux: the CPU table stays empty
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      // The command's name (field 2) may hold spaces and parentheses: the fields after it start after the last ")".
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      all.set(Number(entry), { ppid: Number(fields[1]), ticks: Number(fields[11]) + Number(fields[12]) });
    } catch {
      // the process ended between the listing and the read: it is not part of the load any more
    }
  }
  const tree = new Map();
  const add = (pid) => {
    const p = all.get(pid);
    if (!p) return;
    let name = String(pid);
    try {
      name = readFileSync(`/proc/${pid}/cmdline`, "utf8")
        .split("\0")
        .filter(Boolean)
        .map((a) => a.split("/").slice(-2).join("/"))
        .join(" ")
        .slice(0, 60);
    } catch {
      // ended meanwhile: its pid names it
    }
    tree.set(pid, { name, ticks: p.ticks });
    for (const [child, c] of all) if (c.ppid === pid) add(child);
  };
  add(rootPid);
  return tree;
}

/** Self time by function (name and place) of the samples within `[from, to]` (µs), idle excluded from the percentages' base. */
function summarize(profile, count, [from, to]) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map();
  let t = profile.startTime;
  for (let i = 0; i < profile.samples.length; i++) {
    t += profile.timeDeltas[i];
    if (t < from || t > to) continue;
    const node = byId.get(profile.samples[i]);
    const dt = (profile.timeDeltas[i + 1] ?? 0) / 1000;
    const { functionName, url, lineNumber } = node.callFrame;
    const where = url ? `${url.replace(`file://${root}`, "").replace(/^.*node_modules\//, "node_modules/")}:${lineNumber + 1}` : "";
    const key = `${functionName || "(anonymous)"}\t${where}`;
    self.set(key, (self.get(key) ?? 0) + dt);
  }
  const busy = [...self].filter(([k]) => !k.startsWith("(idle)")).reduce((a, [, v]) => a + v, 0);
  const top = [...self]
    .filter(([k]) => !k.startsWith("(idle)"))
    .sort((a, b) => b[1] - a[1])
    .slice(0, count)
    .map(([k, ms]) => {
      const [name, where] = k.split("\t");
      return { name, where, ms, percent: (ms / busy) * 100 };
    });
  return { top, busyMs: busy, windowMs: (to - from) / 1000 };
}
