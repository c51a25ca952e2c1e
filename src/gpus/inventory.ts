// The host's GPUs, as `nvidia-smi` (from PATH) reports them: index, UUID, name, memory, utilization, MIG mode,
// and the driver and CUDA versions. Pure parsers of its machine-readable output, and one thin runner.
// No nvidia-smi on PATH means no GPUs (a laptop, a CPU box); an nvidia-smi that fails (no driver loaded, a GPU
// fallen off the bus) is an error carrying its message, so the operator sees why instead of "no GPUs".

import { execFile } from "node:child_process";
import { UserError } from "../errors.js";
import { typeIdsOfCard } from "svc/internal";

/** What `--query-gpu` asks for, in this order (the parser reads the columns by position). */
export const GPU_QUERY_FIELDS = ["index", "uuid", "name", "memory.total", "memory.used", "utilization.gpu", "mig.mode.current", "driver_version"] as const;
export const GPU_QUERY_ARGS = [`--query-gpu=${GPU_QUERY_FIELDS.join(",")}`, "--format=csv,noheader,nounits"];

export interface GpuDevice {
  index: number;
  /** "GPU-db2ab84d-..."; what CUDA_VISIBLE_DEVICES and Docker's DeviceIDs name. */
  uuid: string;
  /** Exactly as nvidia-smi prints it, e.g. "NVIDIA H200". */
  name: string;
  memoryTotalMiB: number;
  memoryUsedMiB: number | null;
  /** Percent; null where the GPU does not report it (MIG). */
  utilizationPercent: number | null;
  /** "Enabled", "Disabled", or null where the GPU has no MIG ("[N/A]"). */
  migMode: string | null;
  /** The ids this GPU satisfies besides ANY: its pools, then its card name. */
  typeIds: string[];
}

export interface GpuInventory {
  gpus: GpuDevice[];
  driverVersion: string | null;
  cudaVersion: string | null;
  /** Where it came from: "nvidia-smi", or "none" when there is no nvidia-smi on PATH. */
  source: "nvidia-smi" | "none";
}

export class GpuInventoryError extends UserError {}

/** "[N/A]", "N/A", "[Not Supported]" and "" are how nvidia-smi says a value does not exist. */
function absent(value: string): boolean {
  return value === "" || /^\[?(N\/A|Not Supported|Unknown Error|Insufficient Permissions)\]?$/i.test(value);
}

function numberOrNull(value: string): number | null {
  if (absent(value)) return null;
  const n = Number(value.replace(/\s*(MiB|%)$/, ""));
  return Number.isFinite(n) ? n : null;
}

/**
 * The rows of `nvidia-smi --query-gpu=<GPU_QUERY_FIELDS> --format=csv,noheader,nounits`. Throws on output that
 * does not have that shape (a different nvidia-smi would otherwise be read as wrong numbers). The driver version
 * is the same on every row; it is returned once.
 */
export function parseGpuQuery(csv: string): { gpus: GpuDevice[]; driverVersion: string | null } {
  const gpus: GpuDevice[] = [];
  let driverVersion: string | null = null;
  const lines = csv
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l.length > 0);
  for (const line of lines) {
    const cells = line.split(",").map((c) => c.trim());
    const fixedBefore = 2;
    const fixedAfter = GPU_QUERY_FIELDS.length - fixedBefore - 1;
    if (cells.length < GPU_QUERY_FIELDS.length) throw new GpuInventoryError(`nvidia-smi printed a GPU line this svc cannot read: ${JSON.stringify(line)}`);
    // A card name could hold a comma: everything between the fixed columns is the name.
    const name = cells.slice(fixedBefore, cells.length - fixedAfter).join(", ");
    const [indexText, uuid] = cells as [string, string];
    const [memTotal, memUsed, util, mig, driver] = cells.slice(cells.length - fixedAfter) as [string, string, string, string, string];
    const index = Number(indexText);
    const memoryTotalMiB = numberOrNull(memTotal);
    if (!Number.isInteger(index) || !uuid.startsWith("GPU-") || memoryTotalMiB === null) {
      throw new GpuInventoryError(`nvidia-smi printed a GPU line this svc cannot read: ${JSON.stringify(line)}`);
    }
    if (!absent(driver)) driverVersion = driver;
    gpus.push({
      index,
      uuid,
      name,
      memoryTotalMiB,
      memoryUsedMiB: numberOrNull(memUsed),
      utilizationPercent: numberOrNull(util),
      migMode: absent(mig) ? null : mig,
      typeIds: typeIdsOfCard(name),
    });
  }
  return { gpus: gpus.sort((a, b) => a.index - b.index), driverVersion };
}

/** The CUDA version from plain `nvidia-smi`'s header ("CUDA Version: 13.0") or `nvidia-smi -q` ("CUDA Version : 13.0"). */
export function parseCudaVersion(text: string): string | null {
  return /CUDA Version\s*:\s*([0-9][0-9.]*)/.exec(text)?.[1] ?? null;
}

interface RunResult {
  stdout: string;
  stderr: string;
}

/** Run `command args` with a timeout; undefined when the command does not exist. */
function run(command: string, args: readonly string[], timeoutMs: number, env: NodeJS.ProcessEnv): Promise<RunResult | undefined> {
  return new Promise((resolve, reject) => {
    execFile(command, args, { timeout: timeoutMs, env, encoding: "utf8", maxBuffer: 4 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (!err) return resolve({ stdout, stderr });
      const e = err as NodeJS.ErrnoException & { killed?: boolean; code?: string | number };
      if (e.code === "ENOENT") return resolve(undefined);
      if (e.killed) return reject(new GpuInventoryError(`${command} ${args.join(" ")} did not answer within ${timeoutMs} ms`));
      const said = (stderr || stdout).trim();
      reject(new GpuInventoryError(`${command} ${args.join(" ")} failed (exit ${String(e.code)})${said ? `: ${said}` : ""}`, { cause: err }));
    });
  });
}

export interface InventoryOptions {
  /** The binary (default: nvidia-smi, looked up on PATH). */
  command?: string;
  /** Per call (default 10 s: a healthy one answers in tens of milliseconds, a wedged driver never). */
  timeoutMs?: number;
  env?: NodeJS.ProcessEnv;
}

/** The host's GPUs now. No nvidia-smi: an empty inventory. A failing one: GpuInventoryError with its message. */
export async function readInventory(options: InventoryOptions = {}): Promise<GpuInventory> {
  const command = options.command ?? "nvidia-smi";
  const timeoutMs = options.timeoutMs ?? 10_000;
  const env = options.env ?? process.env;
  const query = await run(command, GPU_QUERY_ARGS, timeoutMs, env);
  if (!query) return { gpus: [], driverVersion: null, cudaVersion: null, source: "none" };
  const { gpus, driverVersion } = parseGpuQuery(query.stdout);
  // The CUDA version is only in the human-readable header; the query above already answered, so a header that
  // fails costs only that version (shown as unknown), never the GPUs.
  const header = await run(command, [], timeoutMs, env).catch(() => undefined);
  return { gpus, driverVersion, cudaVersion: header ? parseCudaVersion(header.stdout) : null, source: "nvidia-smi" };
}

/**
 * The GPU type ids this host offers: an operator's override (SVC_GPU_TYPES) when set, else every id its GPUs
 * satisfy (pools, then card names), in GPU index order, each once.
 */
export function hostGpuTypeIds(inventory: Pick<GpuInventory, "gpus">, override?: readonly string[]): string[] {
  if (override && override.length > 0) return [...override];
  return [...new Set(inventory.gpus.flatMap((g) => g.typeIds))];
}
