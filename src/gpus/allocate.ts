// Which whole GPUs a worker gets: the first type of its endpoint's priority list with enough free GPUs, and
// exactly which ones; or why it must wait ("HOPPER_141: 2 of 2 in use"). And, when GPUs free up, which waiting
// endpoint goes first. Pure: the caller holds the inventory and the holds, and starts or stops workers.

import type { GpuDevice } from "./inventory.js";
import { ANY_GPU, cardMatches } from "svc/internal";

/** gpu uuid -> the worker holding it. */
export type GpuHolds = ReadonlyMap<string, string>;

/** What one worker of an endpoint needs. */
export interface GpuRequest {
  /** Priority order; ANY matches every GPU. */
  typeIds: readonly string[];
  /** Whole GPUs per worker (>= 1). */
  count: number;
}

export interface TypeUsage {
  typeId: string;
  /** GPUs of the host that satisfy it (MIG-enabled ones excepted). */
  total: number;
  inUse: number;
}

export type Allocation =
  | { kind: "allocated"; typeId: string; uuids: string[]; indexes: number[] }
  | {
      kind: "waiting";
      /** Per type, e.g. "HOPPER_141: 2 of 2 in use; ADA_24: none on this host". */
      reason: string;
      usage: TypeUsage[];
      /** False when no type has `count` GPUs on this host at all: waiting cannot help (refuse at deploy). */
      satisfiable: boolean;
    };

type Gpu = Pick<GpuDevice, "uuid" | "index" | "name" | "migMode"> & { typeIds?: readonly string[] };

/**
 * Whether a GPU satisfies a written id: by its card (ANY, its pool, its name), or by the ids the caller gave it
 * (`typeIds`: an operator's override for cards nvidia-smi names in a way no list knows).
 */
function satisfies(typeId: string, gpu: Gpu): boolean {
  return cardMatches(typeId, gpu.name) || (gpu.typeIds?.includes(typeId) ?? false);
}

/**
 * A GPU with MIG enabled is split into instances with their own ids: giving the whole GPU's UUID to a worker
 * would give it none of them, so such GPUs are not handed out whole.
 */
function assignable(gpu: Gpu): boolean {
  return gpu.migMode !== "Enabled";
}

/** What the host has for a request's types, and how much of it is held. Pure. */
export function gpuUsage(gpus: readonly Gpu[], holds: GpuHolds, typeIds: readonly string[]): TypeUsage[] {
  return typeIds.map((typeId) => {
    const matching = gpus.filter((g) => assignable(g) && satisfies(typeId, g));
    return { typeId, total: matching.length, inUse: matching.filter((g) => holds.has(g.uuid)).length };
  });
}

function describeUsage(u: TypeUsage, count: number): string {
  if (u.total === 0) return `${u.typeId}: none on this host`;
  if (u.total < count) return `${u.typeId}: ${u.total} on this host, ${count} needed`;
  return `${u.typeId}: ${u.inUse} of ${u.total} in use${count > 1 ? `, ${count} needed` : ""}`;
}

/**
 * The first type in `request.typeIds` with `request.count` free GPUs, and which ones (lowest index first); or
 * `waiting` with what the host has and what is in use. Pure.
 */
export function allocateGpus(gpus: readonly Gpu[], holds: GpuHolds, request: GpuRequest): Allocation {
  const byIndex = [...gpus].sort((a, b) => a.index - b.index);
  for (const typeId of request.typeIds) {
    const free = byIndex.filter((g) => assignable(g) && satisfies(typeId, g) && !holds.has(g.uuid));
    if (free.length >= request.count) {
      const chosen = free.slice(0, request.count);
      return { kind: "allocated", typeId, uuids: chosen.map((g) => g.uuid), indexes: chosen.map((g) => g.index) };
    }
  }
  const usage = gpuUsage(byIndex, holds, request.typeIds);
  return {
    kind: "waiting",
    reason: usage.map((u) => describeUsage(u, request.count)).join("; "),
    usage,
    satisfiable: usage.some((u) => u.total >= request.count),
  };
}

/** Whole GPUs per worker of an endpoint's resource: 0 for CPU; a manifest built before gpuCount existed means 1. */
export function gpuCountOf(resource: { computeType: "GPU" | "CPU"; gpuCount?: number }): number {
  return resource.computeType === "GPU" ? (resource.gpuCount ?? 1) : 0;
}

/** What an endpoint's resource asks of each worker; undefined for a CPU endpoint (its workers get no GPU). */
export function gpuRequestOf(resource: { computeType: "GPU" | "CPU"; gpuTypeIds: readonly string[]; gpuCount?: number }): GpuRequest | undefined {
  if (resource.computeType !== "GPU") return undefined;
  // An endpoint that names no type takes any GPU.
  return { typeIds: resource.gpuTypeIds.length > 0 ? resource.gpuTypeIds : [ANY_GPU], count: gpuCountOf(resource) };
}

export interface WaitingEndpoint {
  endpointId: string;
  request: GpuRequest;
  /** When it started waiting (ms, the caller's clock). */
  since: number;
  /** It has fewer workers than workersMin: it goes before endpoints that only want more. */
  belowMin: boolean;
}

/** The order waiting endpoints are served in: below workersMin first, then longest waiting, then by id. Pure. */
export function waitingOrder(waiting: readonly WaitingEndpoint[]): WaitingEndpoint[] {
  return [...waiting].sort(
    (a, b) => Number(b.belowMin) - Number(a.belowMin) || a.since - b.since || (a.endpointId < b.endpointId ? -1 : a.endpointId > b.endpointId ? 1 : 0),
  );
}

/**
 * Which waiting endpoint starts a worker now, with its GPUs; undefined when none can. Endpoints are served in
 * `waitingOrder`. One that cannot start yet keeps the free GPUs it could use for itself, so a later endpoint
 * asking for fewer GPUs of the same types does not take them one by one and starve it; a later endpoint whose
 * types it cannot use still goes ahead. Pure.
 */
export function pickWaiting(
  waiting: readonly WaitingEndpoint[],
  gpus: readonly Gpu[],
  holds: GpuHolds,
): { endpointId: string; allocation: Extract<Allocation, { kind: "allocated" }> } | undefined {
  const reserved = new Map(holds);
  for (const entry of waitingOrder(waiting)) {
    const allocation = allocateGpus(gpus, reserved, entry.request);
    if (allocation.kind === "allocated") return { endpointId: entry.endpointId, allocation };
    // Never satisfiable here: it reserves nothing (it would block the others forever).
    if (!allocation.satisfiable) continue;
    for (const g of gpus) {
      if (!reserved.has(g.uuid) && assignable(g) && entry.request.typeIds.some((t) => satisfies(t, g))) reserved.set(g.uuid, `reserved:${entry.endpointId}`);
    }
  }
  return undefined;
}
