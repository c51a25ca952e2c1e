// A sandboxed worker's network: a namespace of its own (bwrap --unshare-net) that Debian's pasta (package passt)
// connects to the outside, so handlers keep outbound access while the host's loopback (127.0.0.1 services, the
// service's internal listeners) is out of reach. The one way back to the host is the job API's port: pasta forwards
// the namespace's 127.0.0.1:<port> to the host's (-T), so SVC_API_URL is the same address inside. Nothing else of
// the host's loopback is mapped (--no-map-gw: the gateway address is not the host). The arguments are pure; the
// attach runs pasta.

import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * pasta's arguments to connect the network namespace of `pid`, forwarding only `hostPorts` (the job API's, and the
 * S3 API's where it has a port of its own) to the host.
 * Run by an unprivileged service, pasta joins the sandbox's user namespace with it (the pid as its target). Run by
 * root, pasta would drop to `nobody` before it opens the namespace, and joining the sandbox's user namespace as
 * root is refused: it keeps root (`--runas 0`, the privilege it needs to enter a namespace it does not own) and
 * enters the network namespace alone, by its path. pasta confines itself either way (its own namespaces, no
 * file system, a seccomp filter). Pure.
 */
export function pastaArgs(pid: number, hostPorts: readonly number[], pidFile: string, asRoot = false, inbound: readonly number[] = []): string[] {
  return [
    "--quiet",
    "--config-net",
    // Connections to the gateway address stay connections to the gateway: not the host's loopback.
    "--no-map-gw",
    // No port of the host reaches into the namespace but a load-balanced worker's own (on the host's loopback, where
    // the service proxies to it), and none of the namespace's reaches the host but the API's.
    "--tcp-ports",
    inbound.length === 0 ? "none" : inbound.map((port) => `127.0.0.1/${port}`).join(","),
    "--udp-ports",
    "none",
    "--tcp-ns",
    hostPorts.length === 0 ? "none" : [...new Set(hostPorts)].join(","),
    "--udp-ns",
    "none",
    "--pid",
    pidFile,
    ...(asRoot ? ["--runas", "0", "--netns", `/proc/${pid}/ns/net`] : [String(pid)]),
  ];
}

/** Whether this process runs as root (pasta is then started as `pastaArgs` says for root). */
const runsAsRoot = () => typeof process.getuid === "function" && process.getuid() === 0;

/** The port of a loopback URL (the job API as workers on this host reach it); undefined for any other address. Pure. */
export function loopbackPort(url: string): number | undefined {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return undefined;
  }
  if (!["127.0.0.1", "localhost", "[::1]"].includes(u.hostname)) return undefined;
  return Number(u.port || (u.protocol === "https:" ? 443 : 80));
}

/**
 * Whether pasta can connect a sandbox's namespace here: a throwaway sandbox (`bwrapArgs`: its arguments, up to
 * the command) is connected as a worker's would be. Some hosts refuse it (pasta joins the sandbox's user
 * namespace, which a container's own restrictions, or running as root there, may forbid): then workers keep the
 * host's network, and the reason is said.
 */
export function probePasta(bwrap: string, bwrapArgs: readonly string[], pasta: string): { ok: true } | { ok: false; why: string } {
  const dir = mkdtempSync(join(tmpdir(), "svc-pasta-probe-"));
  try {
    const info = join(dir, "info");
    const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
    const script = [
      `${[bwrap, ...bwrapArgs, "--info-fd", "3", "--", "/bin/sh", "-c", "sleep 5"].map(q).join(" ")} 3>${q(info)} >/dev/null 2>&1 &`,
      "i=0; while [ $i -lt 50 ] && ! grep -q child-pid " + q(info) + " 2>/dev/null; do sleep 0.05; i=$((i+1)); done",
      `pid=$(grep -o '"child-pid": *[0-9]*' ${q(info)} | grep -o '[0-9]*$')`,
      runsAsRoot()
        ? `${[pasta, ...pastaArgs(0, [], join(dir, "pid"), true).slice(0, -1)].map(q).join(" ")} "/proc/$pid/ns/net" 2>&1; rc=$?`
        : `${[pasta, ...pastaArgs(0, [], join(dir, "pid")).slice(0, -1)].map(q).join(" ")} "$pid" 2>&1; rc=$?`,
      `[ -s ${q(join(dir, "pid"))} ] && kill "$(cat ${q(join(dir, "pid"))})" 2>/dev/null`,
      'kill -9 "$pid" 2>/dev/null; exit $rc',
    ].join("\n");
    const r = spawnSync("/bin/sh", ["-c", script], { encoding: "utf8", timeout: 10_000 });
    if (r.status === 0) return { ok: true };
    const said = (r.stdout + r.stderr)
      .split("\n")
      .filter((l) => l.trim() && !/syslog/.test(l))
      .join("; ");
    return { ok: false, why: `pasta cannot connect a sandbox's network here (${said || `exit ${r.status}`})` };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export interface AttachedNetwork {
  /** pasta's own pid (it runs in the background): a service that adopts the worker stops it by this (stopPasta). */
  pid?: number;
  /** End pasta (the worker exited). */
  stop(): void;
}

/**
 * Stop the pasta of pid `pid`, if that pid is still a pasta (a pid is reused once its process is gone): what
 * a service does for a worker it adopted, or found gone, whose pasta an earlier run started.
 */
export function stopPasta(pid: number): void {
  let comm = "";
  try {
    comm = readFileSync(`/proc/${pid}/comm`, "utf8").trim();
  } catch {
    return; // gone already
  }
  if (!/^(passt|pasta)/.test(comm)) return;
  try {
    process.kill(pid, "SIGTERM");
  } catch {
    // gone between the check and the signal
  }
}

/**
 * Connect the network namespace of `pid` (a sandboxed worker's, held before its exec) with pasta. Resolves once
 * the namespace is configured (pasta forks into the background then); rejects with pasta's own words.
 */
export function attachNetwork(
  pasta: string,
  pid: number,
  hostPorts: readonly number[],
  runDir: string,
  inbound: readonly number[] = [],
): Promise<AttachedNetwork> {
  const pidFile = join(runDir, `pasta-${pid}.pid`);
  return new Promise((resolve, reject) => {
    const child = spawn(pasta, pastaArgs(pid, hostPorts, pidFile, runsAsRoot(), inbound), { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr!.on("data", (c: Buffer) => (stderr += c.toString()));
    child.once("error", reject);
    child.once("exit", (code, signal) => {
      if (code !== 0) return reject(new Error(`pasta could not connect the worker's network: ${stderr.trim() || `exit ${code ?? signal}`}`));
      let daemon: number | undefined;
      try {
        daemon = Number(readFileSync(pidFile, "utf8").trim()) || undefined;
      } finally {
        rmSync(pidFile, { force: true });
      }
      resolve({
        pid: daemon,
        stop() {
          if (daemon === undefined) return;
          try {
            process.kill(daemon, "SIGTERM");
          } catch {
            // Gone already: its namespace went with the worker.
          }
          daemon = undefined;
        },
      });
    });
  });
}
