// Network volumes: `{base_url}/v2/network-volumes[/{id}]`. A volume is a directory under
// <dataDir>/volumes/<id>; workers of endpoints attached to it get it at SVC_VOLUME_PATH (process workers) or
// /svc-volume (containers). It lives until the volume is deleted.
// Planning (what a request changes) is pure; the handlers do the I/O.

import type { IncomingMessage, ServerResponse } from "node:http";
import type { Principal } from "../keys/auth.js";
import { newId } from "../keys/auth.js";
import { sendJson } from "../http/wire.js";
import { HttpProblem } from "../http/problems.js";
import { SCHEMAS, validate, type VolumeType } from "../http/schema.js";
import type { EndpointRow } from "../store/types.js";
import {
  readObjectBody,
  requireAccess,
  resolveVolume,
  volumeDir,
  volumeNameProblem,
  VOLUME_ID_PATTERN,
  type ManagementContext,
  type ManagementDeps,
} from "./context.js";
import type { DataCenterConfig } from "./datacenters.js";
import type { VolumeRecord } from "./store.js";
import { errorMessage } from "../../errors.js";

export interface NetworkVolume {
  id: string;
  name: string;
  size: number;
  dataCenter: string;
  type: VolumeType;
}

export function volumeJson(v: VolumeRecord): NetworkVolume {
  return { id: v.id, name: v.name, size: v.size, dataCenter: v.dataCenter, type: v.type };
}

/** A new volume from a create body, or the complete list of `$.path: message` failures. Pure. */
export function planCreateVolume(
  body: unknown,
  config: DataCenterConfig,
  ids: { id: string; userId: string; now: number },
): { volume?: VolumeRecord; errors: string[] } {
  const errors = validate(SCHEMAS.CreateNetworkVolumeRequest, body);
  const b = body as Record<string, unknown>;
  errors.push(...nameProblems(b.name));
  const dc = typeof b.dataCenter === "string" && b.dataCenter.length > 0 ? config.dataCenters.find((d) => d.id === b.dataCenter) : undefined;
  if (typeof b.dataCenter === "string" && b.dataCenter.length > 0 && !dc) {
    errors.push(`$.dataCenter: unknown data center "${b.dataCenter}" (known: ${config.dataCenters.map((d) => d.id).join(", ")})`);
  }
  if (dc && typeof b.type === "string" && (b.type === "STANDARD" || b.type === "HIGH_PERFORMANCE") && !dc.volumeTypes.includes(b.type)) {
    errors.push(`$.type: data center "${dc.id}" offers only ${dc.volumeTypes.join(", ")}`);
  }
  if (errors.length > 0 || !dc) return { errors };
  return {
    volume: {
      id: ids.id,
      userId: ids.userId,
      name: b.name as string,
      size: b.size as number,
      dataCenter: dc.id,
      type: (b.type as VolumeType | undefined) ?? dc.primaryVolumeType,
      createdAt: ids.now,
    },
    errors,
  };
}

/** A given name that the schema accepted (a non-empty string) but the naming rule does not. */
function nameProblems(name: unknown): string[] {
  const problem = typeof name === "string" && name.length > 0 ? volumeNameProblem(name) : undefined;
  return problem ? [`$.name: ${problem}`] : [];
}

/** The volumes a deploy creates (an unknown name: a new volume of the deploying user), or the failures. */
export interface DeployVolumes {
  create: VolumeRecord[];
  errors: string[];
}

/**
 * Each endpoint's `volume` setting at deploy, resolved among the deploying user's own volumes only: by id, else
 * by name. A name none of the user's volumes has gets a new volume of the user under that name (what a plain
 * folder used to be), in the host data center; a reference shaped like an id that is not one of the user's
 * (another user's, or none) is refused, with the same words either way so that no one learns of another's
 * volumes. Pure.
 */
export function planDeployVolumes(
  volumes: VolumeRecord[],
  userId: string,
  resources: Record<string, { volume?: string | null }>,
  newVolume: (name: string) => VolumeRecord,
): DeployVolumes {
  const create: VolumeRecord[] = [];
  const errors: string[] = [];
  for (const [endpoint, resource] of Object.entries(resources).sort(([a], [b]) => (a < b ? -1 : 1))) {
    const ref: unknown = resource?.volume;
    if (ref === undefined || ref === null) continue;
    const problem = typeof ref === "string" ? volumeNameProblem(ref) : `${JSON.stringify(ref)} is not a volume id or name`;
    const sharing = typeof ref === "string" && !problem ? volumes.filter((v) => v.userId === userId && v.name === ref && v.id !== ref) : [];
    if (problem || typeof ref !== "string") errors.push(`endpoint "${endpoint}": volume ${problem}`);
    // The REST API lets two volumes share a name; a deploy naming that name would mount whichever came first.
    else if (sharing.length > 1)
      errors.push(
        `endpoint "${endpoint}": ${sharing.length} of your network volumes are named "${ref}" (${sharing.map((v) => v.id).join(", ")}): name one by id, or rename the other`,
      );
    else if (resolveVolume([...volumes, ...create], userId, ref)) continue;
    else if (VOLUME_ID_PATTERN.test(ref))
      errors.push(`endpoint "${endpoint}": volume "${ref}" is not one of your network volumes (name one of yours by id or name)`);
    else create.push(newVolume(ref));
  }
  return errors.length > 0 ? { create: [], errors } : { create, errors };
}

/** What a shrink is checked against: the bytes the volume holds (writes in flight included) and a GB's bytes. */
export interface VolumeRoom {
  usedBytes: number;
  gbBytes: number;
}

/** Whether the body asks for a smaller size than the volume has (only then are the bytes used needed). Pure. */
export function isShrink(current: VolumeRecord, body: unknown): boolean {
  const size = (body as Record<string, unknown> | null)?.size;
  return typeof size === "number" && Number.isInteger(size) && size < current.size;
}

/**
 * The volume after a rename/resize, or the failures (a size below the bytes used, changing dataCenter or type).
 * A shrink needs `room`; without it a shrink is refused. Pure.
 */
export function planUpdateVolume(current: VolumeRecord, body: unknown, room?: VolumeRoom): { volume?: VolumeRecord; errors: string[] } {
  const errors = validate(SCHEMAS.UpdateNetworkVolumeRequest, body);
  const b = body as Record<string, unknown>;
  errors.push(...nameProblems(b.name));
  if (isShrink(current, body) && !errors.some((e) => e.startsWith("$.size:"))) {
    const size = b.size as number;
    if (!room) {
      errors.push(`$.size: the bytes the volume holds are not known here, so it cannot shrink (it has ${current.size} GB)`);
    } else if (room.usedBytes > size * room.gbBytes) {
      // The smallest size that still holds them (the schema's own minimum is checked above).
      const least = Math.max(Math.ceil(room.usedBytes / room.gbBytes), size + 1);
      errors.push(
        `$.size: the volume holds ${room.usedBytes} bytes, more than ${size} GB (${size * room.gbBytes} bytes); delete files first or give ${least} GB or more`,
      );
    }
  }
  if (typeof b.dataCenter === "string" && b.dataCenter !== current.dataCenter) {
    errors.push(`$.dataCenter: is immutable (the volume is in "${current.dataCenter}")`);
  }
  if (typeof b.type === "string" && b.type !== current.type) errors.push(`$.type: is immutable (the volume is ${current.type})`);
  if (errors.length > 0) return { errors };
  return { volume: { ...current, name: (b.name as string | undefined) ?? current.name, size: (b.size as number | undefined) ?? current.size }, errors };
}

function ownVolume(m: ManagementContext, p: Principal, id: string): VolumeRecord {
  const v = m.store.volume(id);
  // Another user's volume is "not found": ids do not leak across users.
  if (!v || v.userId !== p.userId) throw new HttpProblem(404, `No network volume ${id}`);
  return v;
}

/** Endpoints of the volume's owner that mount it. */
export function endpointsOnVolume(endpoints: Iterable<EndpointRow>, volumes: VolumeRecord[], volume: VolumeRecord): EndpointRow[] {
  const attached: EndpointRow[] = [];
  for (const e of endpoints) {
    if (e.userId !== volume.userId || !e.resource.volume) continue;
    if (resolveVolume(volumes, e.userId, e.resource.volume)?.id === volume.id) attached.push(e);
  }
  return attached;
}

export async function volumeRoute(
  ctx: ManagementDeps,
  m: ManagementContext,
  p: Principal,
  req: IncomingMessage,
  res: ServerResponse,
  id: string | undefined,
): Promise<void> {
  const method = req.method ?? "GET";
  const write = method !== "GET" && method !== "HEAD";
  requireAccess(p, "volumes", write);
  if (id === undefined) {
    if (method === "GET") {
      req.resume();
      return sendJson(res, m.store.volumes(p.userId).map(volumeJson));
    }
    if (method !== "POST") throw new HttpProblem(405, `${method} is not allowed here; use GET or POST`, { headers: { allow: "GET, POST" } });
    const body = await readObjectBody(req);
    const plan = planCreateVolume(body, m.dataCenters, { id: `vol${newId(6)}`, userId: p.userId, now: Date.now() });
    if (!plan.volume) throw new HttpProblem(422, "The network volume request is not valid", { errors: plan.errors });
    await m.volumeStorage.create(plan.volume.id, plan.volume.size);
    await m.store.putVolume(plan.volume);
    return sendJson(res, volumeJson(plan.volume), 201);
  }
  if (method === "GET") {
    req.resume();
    const v = ownVolume(m, p, id);
    // An svc addition: the bytes the volume holds (docs/volumes.md).
    const usedBytes = await ctx.volumes?.usage.used(v.id, volumeDir(m.dataDir, v.id));
    return sendJson(res, usedBytes === undefined ? volumeJson(v) : { ...volumeJson(v), usedBytes });
  }
  if (method === "PATCH") {
    const current = ownVolume(m, p, id);
    const body = await readObjectBody(req);
    const cannotShrink = isShrink(current, body) ? m.volumeStorage.shrinkRefusal() : undefined;
    if (cannotShrink) throw new HttpProblem(422, "The network volume update is not valid", { errors: [`$.size: ${cannotShrink}`] });
    // A smaller size is taken only while the files fit in it: measured now, with writes in flight counted, and
    // with writes admitted only under the smaller size until it is stored or refused (one admitted under the old
    // size after the measurement would land uncounted).
    const shrink = isShrink(current, body) && ctx.volumes ? ctx.volumes.usage.capAdmissions(current.id, (body as { size: number }).size) : undefined;
    try {
      const room: VolumeRoom | undefined =
        shrink && ctx.volumes
          ? { usedBytes: await ctx.volumes.usage.committed(current.id, volumeDir(m.dataDir, current.id)), gbBytes: ctx.volumes.usage.gbBytes }
          : undefined;
      const plan = planUpdateVolume(current, body, room);
      if (!plan.volume) throw new HttpProblem(422, "The network volume update is not valid", { errors: plan.errors });
      if (plan.volume.name !== current.name) {
        // Endpoints that name the volume by its name would lose it (and a later deploy would make a new one).
        const byName = endpointsOnVolume(ctx.endpoints.values(), m.store.volumes(p.userId), current).filter((e) => e.resource.volume === current.name);
        if (byName.length > 0) {
          throw new HttpProblem(
            409,
            `Network volume ${id} is attached by its name "${current.name}" to endpoint(s) ${byName.map((e) => `${e.name} (${e.id})`).join(", ")}; name it by id (${id}) in their settings first`,
          );
        }
      }
      // The cluster's storage first (a claim's request): a refusal there leaves the volume as it was.
      if (plan.volume.size > current.size) {
        await clusterStorage(ctx, `grow network volume ${id}`, (d) => d.resizeVolume?.({ id, sizeGb: plan.volume!.size }));
        await m.volumeStorage.grow(id, plan.volume.size).catch((err: unknown) => {
          throw new HttpProblem(503, `Could not grow the filesystem of network volume ${id}: ${errorMessage(err)}; try again`);
        });
      }
      await m.store.putVolume(plan.volume);
      return sendJson(res, volumeJson(plan.volume));
    } finally {
      shrink?.();
    }
  }
  if (method === "DELETE") {
    req.resume();
    const current = ownVolume(m, p, id);
    const attached = endpointsOnVolume(ctx.endpoints.values(), m.store.volumes(p.userId), current);
    if (attached.length > 0) {
      // A REST endpoint running an app endpoint's code carries that endpoint's name; its own is in its settings.
      const restNames = new Map(m.store.restEndpoints().map((r) => [r.id, r.spec.name]));
      const named = attached.map((e) => `${restNames.get(e.id) ?? e.name} (${e.id})`);
      throw new HttpProblem(400, `Network volume ${id} is mounted by endpoint(s) ${named.join(", ")}; detach or delete them first`);
    }
    await clusterStorage(ctx, `delete the storage of network volume ${id}`, (d) => d.removeVolume?.(id));
    await m.store.deleteVolume(id);
    await m.volumeStorage.remove(id);
    ctx.volumes?.usage.forget(id);
    res.writeHead(204);
    res.end();
    return;
  }
  throw new HttpProblem(405, `${method} is not allowed here; use GET, PATCH or DELETE`, { headers: { allow: "GET, PATCH, DELETE" } });
}

/** What the worker driver keeps of a volume on the cluster, changed with it; its failure is the answer (503). */
async function clusterStorage(
  ctx: ManagementDeps,
  what: string,
  change: (driver: NonNullable<ReturnType<NonNullable<ManagementDeps["clusterVolumes"]>>>) => Promise<void> | undefined,
): Promise<void> {
  const driver = ctx.clusterVolumes?.();
  if (!driver) return;
  try {
    await change(driver);
  } catch (err) {
    throw new HttpProblem(503, `Could not ${what} on the workers' cluster: ${errorMessage(err)}; try again`);
  }
}
