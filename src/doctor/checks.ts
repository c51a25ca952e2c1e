// `svc doctor`: what this machine has for svc, each finding with a fix. Each check does its own small probe and
// returns a finding; `verdict` (pure) decides the exit. A check never throws: a probe that fails is a finding.

import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { createServer } from "node:net";
import { connectDocker, engineAddress, START_ENGINE_HINT } from "../drivers/docker-engine.js";
import { errorMessage } from "../errors.js";
import { readInventory, type GpuInventory } from "../gpus/inventory.js";

export type Level = "ok" | "warn" | "fail" | "info";

export interface Finding {
  check: string;
  level: Level;
  detail: string;
  /** What to do about it (for warn and fail). */
  fix?: string;
}

const MIN_NODE: [number, number] = [20, 18];

/** Node's version against svc's floor (20.18) and its end of life. Pure. */
export function nodeFinding(version: string): Finding {
  const [major = 0, minor = 0] = version.replace(/^v/, "").split(".").map(Number);
  if (major < MIN_NODE[0] || (major === MIN_NODE[0] && minor < MIN_NODE[1])) {
    return { check: "node", level: "fail", detail: `Node ${version} is older than svc needs (20.18)`, fix: "Install Node 22 or 24 LTS (or 20.18+)." };
  }
  if (major === 20)
    return { check: "node", level: "warn", detail: `Node ${version} works but is past its end of life`, fix: "Move to Node 22 or 24 LTS when you can." };
  return { check: "node", level: "ok", detail: `Node ${version}` };
}

export async function dockerFinding(timeoutMs = 3000): Promise<Finding> {
  try {
    const docker = await connectDocker({ timeoutMs });
    const info = (await docker.version()) as { Version?: string };
    return { check: "docker", level: "ok", detail: `Docker engine ${info.Version ?? "(version unknown)"} at ${engineAddress()}` };
  } catch (err) {
    return {
      check: "docker",
      level: "warn",
      // connectDocker's message names the address and the cause.
      detail: `${errorMessage(err)}: \`svc deploy --preview\` and \`svc server --workers docker\` need one; \`svc dev\` does not`,
      fix: START_ENGINE_HINT,
    };
  }
}

/**
 * How Docker workers would be confined on this engine: the OCI runtime they run under (SVC_DOCKER_RUNTIME, else
 * the engine's default) and whether gVisor is there to choose. Pure; `info` is the engine's `docker info`
 * (undefined: no engine answers, which the docker check reports).
 */
export function containerIsolationFinding(
  info: { DefaultRuntime?: string; Runtimes?: Record<string, unknown> } | undefined,
  wanted: string | undefined,
): Finding {
  const check = "containers";
  if (!info) return { check, level: "info", detail: "no Docker engine answers: Docker workers' isolation cannot be read" };
  const runtimes = Object.keys(info.Runtimes ?? {});
  const gvisor = runtimes.find((name) => /runsc/.test(name));
  const confinement = "uid 1000, no capabilities, no-new-privileges, read-only root, bounded /tmp, process/memory/CPU limits";
  if (wanted && !runtimes.includes(wanted)) {
    return {
      check,
      level: "warn",
      detail: `SVC_DOCKER_RUNTIME=${wanted}, but the engine has no such runtime (it has: ${runtimes.join(", ") || "none"}): Docker workers will not start`,
      fix: "Install gVisor (apt-get install runsc) and run scripts/ensure-docker.sh as root to register it, or unset SVC_DOCKER_RUNTIME.",
    };
  }
  const runtime = wanted ?? info.DefaultRuntime ?? "runc";
  if (/runsc/.test(runtime))
    return { check, level: "ok", detail: `Docker workers run under ${runtime} (gVisor: a kernel of its own per container); ${confinement}` };
  return {
    check,
    level: "info",
    detail: `Docker workers run under ${runtime}: ${confinement}; the host's kernel is shared with every worker`,
    fix: gvisor
      ? `gVisor is registered as "${gvisor}": svc server --workers docker --docker-runtime ${gvisor} (or SVC_DOCKER_RUNTIME=${gvisor}) gives each worker a kernel of its own.`
      : "For a kernel per worker: apt-get install runsc, scripts/ensure-docker.sh (registers it), then svc server --docker-runtime runsc.",
  };
}

export async function containerIsolationProbe(wanted: string | undefined, timeoutMs = 3000): Promise<Finding> {
  let info: { DefaultRuntime?: string; Runtimes?: Record<string, unknown> } | undefined;
  try {
    info = (await (await connectDocker({ timeoutMs })).info()) as typeof info;
  } catch {
    // No engine: the docker check says so, with its fix.
    info = undefined;
  }
  return containerIsolationFinding(info, wanted);
}

/**
 * The host's GPUs, one finding each (index, name, memory, the type ids an endpoint may name it by), after one
 * summing them up with the driver and CUDA versions. Pure.
 */
export function gpuInventoryFindings(inventory: GpuInventory): Finding[] {
  if (inventory.gpus.length === 0) {
    // No nvidia-smi, or one that lists nothing: normal on a laptop.
    return [
      {
        check: "gpu",
        level: "info",
        detail:
          "no NVIDIA GPU found (nvidia-smi): GPU endpoints whose workers run on this machine (svc dev, svc server with process or Docker workers) run on its CPU; on Swarm or Kubernetes their scheduler places them on GPU nodes",
      },
    ];
  }
  const versions = [inventory.driverVersion && `driver ${inventory.driverVersion}`, inventory.cudaVersion && `CUDA ${inventory.cudaVersion}`]
    .filter(Boolean)
    .join(", ");
  return [
    { check: "gpu", level: "ok", detail: `${inventory.gpus.length} GPU${inventory.gpus.length === 1 ? "" : "s"}${versions ? ` (${versions})` : ""}` },
    ...inventory.gpus.map((g): Finding => {
      const used = g.memoryUsedMiB === null ? "" : `, ${g.memoryUsedMiB} MiB used`;
      const mig = g.migMode === "Enabled" ? "; MIG enabled: not given to workers whole" : "";
      return { check: `gpu ${g.index}`, level: "ok", detail: `${g.name}, ${g.memoryTotalMiB} MiB${used}; type ${g.typeIds.join(" / ")}; ${g.uuid}${mig}` };
    }),
  ];
}

export async function gpuFindings(): Promise<Finding[]> {
  try {
    return gpuInventoryFindings(await readInventory({ timeoutMs: 5000 }));
  } catch (err) {
    return [
      {
        check: "gpu",
        level: "warn",
        detail: `nvidia-smi is installed but fails: ${errorMessage(err)}`,
        fix: "Check the NVIDIA driver (`nvidia-smi` by hand; a reboot after a driver update); until it answers, the service sees no GPUs.",
      },
    ];
  }
}

/** Whether a TCP port on 127.0.0.1 can be listened on. */
export function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

/**
 * `heldBy`: the address of the svc service the CLI reached, when it listens on this machine at `port`: then the
 * port is in use by that service, which is no problem to fix.
 */
export async function portFinding(port: number, use: string, heldBy?: string): Promise<Finding> {
  if (await portFree(port)) return { check: `port ${port}`, level: "ok", detail: `free (${use})` };
  if (heldBy !== undefined && listensHereOn(heldBy, port)) return { check: `port ${port}`, level: "ok", detail: `in use by the service above (${heldBy})` };
  return {
    check: `port ${port}`,
    level: "warn",
    detail: `in use (${use} would move to the next free port or fail)`,
    fix: `Find what holds it: \`ss -ltnp 'sport = :${port}'\`; or pass --port.`,
  };
}

/** Whether `url` is an address of this machine on `port`. Pure. */
export function listensHereOn(url: string, port: number): boolean {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return false;
  }
  const here = ["127.0.0.1", "localhost", "[::1]", "0.0.0.0", "[::]"].includes(u.hostname);
  return here && Number(u.port || (u.protocol === "https:" ? 443 : 80)) === port;
}

export function chromiumFinding(paths = ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"]): Finding {
  const found = paths.find((p) => existsSync(p));
  if (found) return { check: "chromium", level: "ok", detail: `${found} (the console's browser tests use it)` };
  return { check: "chromium", level: "info", detail: "no Chromium: only the console's browser tests need it", fix: "apt-get install chromium" };
}

/**
 * PostgreSQL's server binaries (Debian's /usr/lib/postgresql/<version>/bin/initdb), which svc's own PostgreSQL
 * test suites start a throwaway server with. A user's service takes a database by URL and needs none of them.
 */
export function postgresServerFinding(root = "/usr/lib/postgresql"): Finding {
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((v) => existsSync(join(root, v, "bin", "initdb")))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (versions.length > 0) return { check: "postgresql", level: "ok", detail: `${join(root, versions[0]!, "bin")} (svc's PostgreSQL test suites use it)` };
  return {
    check: "postgresql",
    level: "info",
    detail: "no PostgreSQL server binaries: only svc's PostgreSQL test suites need them",
    fix: "apt-get install postgresql",
  };
}

/** The reachability of the service the CLI targets, with the key it would use. */
export async function serviceFinding(target: { url: string; apiKey?: string; via: string }): Promise<Finding> {
  const check = "service";
  if (!target.apiKey) {
    return {
      check,
      level: "warn",
      detail: `no API key for ${target.url} (${target.via})`,
      fix: "Run `svc login --url <service URL>`, or set SVC_API_KEY (svc server prints where its admin key is).",
    };
  }
  let response: Response;
  try {
    response = await fetch(`${target.url.replace(/\/+$/, "")}/v1/me`, {
      headers: { authorization: `Bearer ${target.apiKey}` },
      signal: AbortSignal.timeout(5000),
    });
  } catch (err) {
    return {
      check,
      level: "fail",
      detail: `${target.url} (${target.via}) cannot be reached: ${errorMessage(err)}`,
      fix: "Start it (`svc server`, or `svc dev` in the project), or point SVC_API_URL / `svc login --url` at the right address.",
    };
  }
  if (response.status === 401)
    return {
      check,
      level: "fail",
      detail: `${target.url} (${target.via}) refuses the key (401)`,
      fix: "Check the key: `svc login` again, or fix SVC_API_KEY.",
    };
  if (!response.ok)
    return {
      check,
      level: "fail",
      detail: `${target.url} (${target.via}) answered ${response.status} to GET /v1/me`,
      fix: "Is this an svc service of this version? Check the URL.",
    };
  const me = (await response.json()) as { userId: string; scopes: string[] };
  return { check, level: "ok", detail: `${target.url} (${target.via}) as user ${me.userId}, scopes ${me.scopes.join(", ")}` };
}

/** An endpoint as `GET /v1/endpoints` lists it, as far as the crash-loop check reads it. */
export interface ListedEndpoint {
  id: string;
  name: string;
  app?: string;
  environment?: string;
  statusReason?: string | null;
  crashLoop?: { deaths: number; lastDeath: { message: string } };
}

/** One finding per endpoint whose workers keep dying, or one ok when none does. Pure. */
export function crashLoopFindings(endpoints: readonly ListedEndpoint[]): Finding[] {
  const looping = endpoints.filter((e) => e.crashLoop);
  if (looping.length === 0) return [{ check: "crash loops", level: "ok", detail: `no endpoint's workers keep dying (${endpoints.length} endpoint(s))` }];
  return looping.map((e) => ({
    check: "crash loops",
    level: "warn" as const,
    detail: `endpoint ${e.name} (${e.id}${e.app ? `, ${e.app}/${e.environment}` : ""}): ${e.statusReason ?? `${e.crashLoop!.deaths} workers died`}`,
    fix: `Read why in its workers' lines: \`svc logs ${e.name}${e.app ? ` --app ${e.app} --env ${e.environment}` : ""}\` (a SIGKILL is often its memory limit: a larger instance, or less loaded at start).`,
  }));
}

/** The service's endpoints that are crash-looping (only asked once the service answered with the key). */
export async function serviceCrashLoopFindings(target: { url: string; apiKey?: string }): Promise<Finding[]> {
  try {
    const response = await fetch(`${target.url.replace(/\/+$/, "")}/v1/endpoints`, {
      headers: { authorization: `Bearer ${target.apiKey}` },
      signal: AbortSignal.timeout(5000),
    });
    if (!response.ok) return [{ check: "crash loops", level: "info", detail: `GET /v1/endpoints answered ${response.status}: endpoints not checked` }];
    return crashLoopFindings((await response.json()) as ListedEndpoint[]);
  } catch (err) {
    return [{ check: "crash loops", level: "info", detail: `could not list the endpoints: ${errorMessage(err)}` }];
  }
}

/**
 * The isolation process workers get here (SVC_SANDBOX, default auto): sandboxed in bubblewrap, or not (then `svc
 * server` with process workers serves one user only). `resolve` is the sandbox module's resolveSandbox.
 */
export function sandboxFinding(
  setting: string,
  resolve: (setting: "auto" | "bwrap" | "none") => { kind: "bwrap" | "none"; description: string; dispose?(): void },
): Finding {
  const check = "sandbox";
  const wanted = setting === "bwrap" || setting === "none" ? setting : "auto";
  let sandbox: ReturnType<typeof resolve>;
  try {
    sandbox = resolve(wanted);
  } catch (err) {
    return {
      check,
      level: "fail",
      detail: `SVC_SANDBOX=bwrap, but ${errorMessage(err)}`,
      fix: "apt-get install bubblewrap, on a kernel with unprivileged user namespaces; or SVC_SANDBOX=auto.",
    };
  }
  sandbox.dispose?.();
  if (sandbox.kind === "bwrap") {
    // Sandboxed, but on the host's network: its loopback services are within a tenant's reach.
    const hostNetwork = /the host's network: (.*)\)$/.exec(sandbox.description);
    if (hostNetwork)
      return {
        check,
        level: "warn",
        detail: `process workers: ${sandbox.description}: workers can reach the host's 127.0.0.1 services and the service's internal listeners`,
        fix: "apt-get install passt (its pasta gives each worker a network namespace of its own), and run the service as an unprivileged user.",
      };
    return { check, level: "ok", detail: `process workers: ${sandbox.description}` };
  }
  return {
    check,
    level: wanted === "none" ? "info" : "warn",
    detail: `process workers: ${sandbox.description}: \`svc server\` serves one user only with them (unless --single-tenant); \`svc dev\` is unaffected`,
    fix: "apt-get install bubblewrap (Linux with user namespaces), or run Docker workers (--workers docker).",
  };
}

/**
 * Whether `snapshot: true` endpoints restore their workers from a checkpoint here (`problem` from the CRIU dry run,
 * drivers/criu.ts). Never a failure: without checkpoints such workers start as usual, only slower. Pure.
 */
export function snapshotFinding(problem: string | undefined): Finding {
  const check = "snapshots";
  if (problem === undefined)
    return { check, level: "ok", detail: "CRIU checkpoints and restores here: snapshot: true endpoints' workers start from a snapshot" };
  const installed = !/not installed|Linux only|needs root/.test(problem);
  return {
    check,
    level: installed ? "warn" : "info",
    detail: `snapshot: true endpoints start their workers without a snapshot here: ${problem}`,
    fix: installed
      ? "Run the service as root with CAP_SYS_RESOURCE (or a hard RLIMIT_NOFILE of at least fs.nr_open) and a CRIU that knows this kernel (docs/cold-start.md)."
      : "Install CRIU 4.1 or newer and run the service as root on Linux to take snapshots (docs/cold-start.md).",
  };
}

/** The exit of `svc doctor`: 1 when anything failed, else 0. Pure. */
export function verdict(findings: Finding[]): 0 | 1 {
  return findings.some((f) => f.level === "fail") ? 1 : 0;
}

/** The host's model cache as GET /v1/models answers (service/models/routes.ts). */
export interface ModelCacheView {
  hub: string | null;
  usedBytes: number;
  limitBytes: number | null;
  models: Array<{
    model: string;
    state: "ready" | "fetching" | "failed";
    bytes?: number;
    doneBytes?: number;
    totalBytes?: number;
    inUse: number;
    error?: { code: string; message: string };
  }>;
}

const MB = (n: number) => `${Math.round(n / 1e6)} MB`;

/**
 * What `svc doctor` says of the service's model cache: its size, each fetch under way, each that failed. Pure. The
 * console's Models page gives the same advice for a failure (console/models-data.ts, fetchAdvice): change both.
 */
export function modelCacheFindings(view: ModelCacheView): Finding[] {
  if (view.hub === null) return [{ check: "model cache", level: "info", detail: "the service starts no workers here: no model cache" }];
  const ready = view.models.filter((m) => m.state === "ready");
  const findings: Finding[] = [
    {
      check: "model cache",
      level: "ok",
      detail: `${ready.length} model(s), ${MB(view.usedBytes)}${view.limitBytes === null ? " (no size limit)" : ` of ${MB(view.limitBytes)}`}, from ${view.hub}`,
    },
  ];
  for (const m of view.models) {
    if (m.state === "fetching")
      findings.push({
        check: "model cache",
        level: "info",
        detail: `fetching model ${m.model}: ${m.totalBytes === undefined ? "looking it up" : `${MB(m.doneBytes ?? 0)} of ${MB(m.totalBytes)}`}`,
      });
    if (m.state === "failed")
      findings.push({
        check: "model cache",
        level: "warn",
        detail: `model ${m.model} cannot be fetched (${m.error?.code}): ${m.error?.message}`,
        fix:
          m.error?.code === "unauthorized"
            ? "Give the service a token of the hub that may read it (SVC_MODEL_HUB_TOKEN)."
            : m.error?.code === "not_found"
              ? "Check the model's name and revision on the hub (or the mirror SVC_MODEL_HUB names)."
              : "Check that the service reaches the hub (SVC_MODEL_HUB); it tries again by itself.",
      });
  }
  return findings;
}

/** GET /v1/models of the service the CLI targets, as findings; none when the service cannot be asked. */
export async function modelCacheFinding(target: { url: string; apiKey?: string }): Promise<Finding[]> {
  const view = await askService<ModelCacheView>(target, "/v1/models");
  return view ? modelCacheFindings(view) : [];
}

/**
 * A JSON answer of the service the CLI targets, for a finding beside the service's own; undefined without a key,
 * when it is unreachable (the service finding says so, with its fix), or when it refuses (an older version, a key
 * that may not read it: the service finding says what matters).
 */
async function askService<T>(target: { url: string; apiKey?: string }, path: string): Promise<T | undefined> {
  if (!target.apiKey) return undefined;
  try {
    const response = await fetch(`${target.url.replace(/\/+$/, "")}${path}`, {
      headers: { authorization: `Bearer ${target.apiKey}` },
      signal: AbortSignal.timeout(5000),
    });
    return response.ok ? ((await response.json()) as T) : undefined;
  } catch {
    return undefined;
  }
}

/** What `svc doctor` says of volume quotas, from the service's `/v1/me` (`volumeQuotas`). Pure. */
export function volumeQuotaFindingOf(volumeQuotas: unknown): Finding[] {
  if (volumeQuotas === "filesystem")
    return [{ check: "volume quotas", level: "ok", detail: "in force: a worker writing past its network volume's size gets ENOSPC" }];
  if (volumeQuotas === "s3-only")
    return [
      {
        check: "volume quotas",
        level: "warn",
        detail: "not in force: a network volume's size binds S3 writes only; workers can fill the host's disk through a volume",
        fix: "Start svc server with SVC_VOLUME_QUOTAS=loop (as root, with e2fsprogs): each volume a filesystem of its size (docs/security.md).",
      },
    ];
  // A service of a version that does not say: nothing to tell.
  return [];
}

/** Volume quotas as the service the CLI targets says (nothing when it cannot be asked: its own finding says why). */
export async function volumeQuotaFinding(target: { url: string; apiKey?: string }): Promise<Finding[]> {
  const me = await askService<{ volumeQuotas?: unknown }>(target, "/v1/me");
  return me ? volumeQuotaFindingOf(me.volumeQuotas) : [];
}
