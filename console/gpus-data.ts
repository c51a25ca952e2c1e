// The host's GPUs as the service reports them (`GET /v1/gpus`, and an endpoint's `/health` `gpus`), and the pure
// helpers the GPU views share: who holds a GPU, how much of it is in use, which GPUs each worker holds.

import type { GpuAnswer, GpuHolderAnswer, GpuListAnswer } from "../src/service/http/answers.js";
import { api } from "./api.js";

/** The GPUs as the service defines its answers (`GET /v1/gpus`, `/health`'s `gpus`). */
export type GpuHolder = GpuHolderAnswer;
export type Gpu = GpuAnswer;
export type GpuList = GpuListAnswer;

/** `refresh`: the service reads nvidia-smi again first, instead of answering with its last sample. */
export function loadGpus(refresh = false): Promise<GpuList> {
  return api<GpuList>(`/v1/gpus${refresh ? "?refresh=1" : ""}`);
}

export type Holding = { kind: "free" } | { kind: "other" } | ({ kind: "worker" } & GpuHolder);

/** Who holds a GPU, as one of three cases. Pure. */
export function holdingOf(gpu: Pick<Gpu, "holder">): Holding {
  if (gpu.holder === null) return { kind: "free" };
  if ("held" in gpu.holder) return { kind: "other" };
  return { kind: "worker", ...gpu.holder };
}

/** Memory in GiB with one decimal (nvidia-smi counts MiB): "1.2 GiB"; below 1 GiB in MiB. Pure. */
export function formatMiB(mib: number): string {
  if (mib < 1024) return `${mib} MiB`;
  return `${(mib / 1024).toFixed(1)} GiB`;
}

/** "1.2 of 79.6 GiB used" (the total's unit for both), or "— of 79.6 GiB" when not sampled. Pure. */
export function memoryText(usedMiB: number | null, totalMiB: number): string {
  const total = formatMiB(totalMiB);
  if (usedMiB === null) return `— of ${total}`;
  const unit = totalMiB < 1024 ? "MiB" : "GiB";
  const used = unit === "MiB" ? String(usedMiB) : (usedMiB / 1024).toFixed(1);
  return `${used} of ${total} used`;
}

/** The GPUs each worker holds, workers in order of their lowest GPU index. Pure. */
export function gpusByWorker(gpus: readonly Gpu[]): Array<{ workerId: string; typeId: string | null; gpus: Gpu[] }> {
  const workers = new Map<string, { workerId: string; typeId: string | null; gpus: Gpu[] }>();
  for (const gpu of [...gpus].sort((a, b) => a.index - b.index)) {
    const h = holdingOf(gpu);
    if (h.kind !== "worker") continue;
    if (!workers.has(h.workerId)) workers.set(h.workerId, { workerId: h.workerId, typeId: h.typeId, gpus: [] });
    workers.get(h.workerId)!.gpus.push(gpu);
  }
  return [...workers.values()];
}
