// The pure parts of `svc deploy --preview`: the manifest a preview deploys, the prefix of streamed log lines, and which crashed previews'
// Docker objects may be removed. src/preview/session.ts does the I/O.

import type { Manifest } from "svc/internal";
import { LABELS } from "../drivers/docker-engine.js";

/**
 * The manifest a preview deploys: every endpoint keeps one container from the start (workersMin at least 1), so
 * every printed URL answers without a cold start; scaling up to workersMax still works. Pure.
 */
export function previewManifest(manifest: Manifest): Manifest {
  const resources = Object.fromEntries(
    Object.entries(manifest.resources).map(([name, r]) => {
      const workersMin = Math.max(1, r.workersMin);
      return [name, { ...r, workersMin, workersMax: Math.max(workersMin, r.workersMax) }];
    }),
  );
  return { ...manifest, resources };
}

/** Streamed worker output: `<endpoint name padded to width> | <text>`. Pure. */
export function prefixLine(endpointName: string, width: number, text: string): string {
  return `${endpointName.padEnd(width)} | ${text}`;
}

/** Labels that mark a preview's Docker objects and their owner, so a later start can tell a crashed one. */
export const PREVIEW_LABELS = {
  preview: "svc.preview",
  pid: "svc.preview.pid",
  host: "svc.preview.host",
} as const;

/**
 * Sessions of crashed previews among labelled Docker objects: owned by a process on this host that is gone.
 * Objects of another host (a shared engine) or without an owner pid are never selected. Pure.
 */
export function staleSessions(
  objects: ReadonlyArray<{ labels: Record<string, string> | undefined }>,
  self: { hostname: string; isAlive(pid: number): boolean },
): string[] {
  const sessions = new Set<string>();
  for (const { labels = {} } of objects) {
    const session = labels[LABELS.session];
    const pid = Number(labels[PREVIEW_LABELS.pid]);
    if (labels[PREVIEW_LABELS.preview] !== "true" || !session || !Number.isInteger(pid) || pid <= 0) continue;
    if (labels[PREVIEW_LABELS.host] !== self.hostname) continue;
    if (!self.isAlive(pid)) sessions.add(session);
  }
  return [...sessions].sort();
}
