// Each endpoint's webhook settings: its default event filter and its signing secrets. A secret is made by the
// service (the first time one is asked for, or needed to sign) and its value is answered once, by the rotation
// that made it; at rest it is sealed under the service's secrets key (secrets/box.ts), bound to its endpoint.
//
// Rotation: the new secret signs at once; the one it replaces signs too (a second signature in the same header,
// as the specification allows) until `previousExpiresAt`, so receivers can switch without refusing a delivery.
//
// The filters are held in memory (the engine decides synchronously whether an event is wanted) and refreshed
// when another replica changes them; secrets are read from the store at each delivery.

import type { SecretBox } from "../secrets/box.js";
import type { Store, StoreOp, WebhookSettingsRow } from "../store/types.js";
import { eventsOf, eventsText, type WebhookEvent } from "./events.js";
import { newSigningSecret } from "./signing.js";

/** How long a rotated-out secret still signs, unless the rotation says otherwise. */
export const DEFAULT_PREVIOUS_SECRET_MS = 24 * 3600_000;
/** The longest a rotated-out secret may be kept. */
export const MAX_PREVIOUS_SECRET_MS = 7 * 24 * 3600_000;

/** An endpoint's webhook settings as the API answers them: never a secret's value. */
export interface WebhookSettingsView {
  endpointId: string;
  /** The events its jobs' webhooks get unless a job names its own. */
  events: WebhookEvent[];
  /** Whether `events` is the default (no filter set). */
  eventsDefault: boolean;
  /** Its signing secret: when it was made, and until when the one before it still signs. null: none yet. */
  signingSecret: { createdAt: number; previousExpiresAt: number | null } | null;
}

const binding = (endpointId: string) => `webhook-signing-secret\u0000${endpointId}`;

const emptyRow = (endpointId: string, now: number): WebhookSettingsRow => ({
  endpointId,
  events: null,
  secret: null,
  secretKeyId: null,
  secretCreatedAt: null,
  previousSecret: null,
  previousKeyId: null,
  previousExpiresAt: null,
  updatedAt: now,
});

/** The view of a row at `now`. Pure. */
export function settingsView(endpointId: string, row: WebhookSettingsRow | undefined, now: number): WebhookSettingsView {
  const events = row?.events ?? null;
  const previous = row?.previousExpiresAt != null && row.previousExpiresAt > now ? row.previousExpiresAt : null;
  return {
    endpointId,
    events: events === null ? ["completed", "failed"] : eventsOf(events),
    eventsDefault: events === null,
    signingSecret: row?.secret ? { createdAt: row.secretCreatedAt ?? row.updatedAt, previousExpiresAt: previous } : null,
  };
}

/** The row after a rotation at `now`: `sealed` is the new secret's, the current one becomes the previous. Pure. */
export function rotatedRow(before: WebhookSettingsRow, sealed: { sealed: string; keyId: string }, keepPreviousMs: number, now: number): WebhookSettingsRow {
  const keep = before.secret !== null && keepPreviousMs > 0;
  return {
    ...before,
    secret: sealed.sealed,
    secretKeyId: sealed.keyId,
    secretCreatedAt: now,
    previousSecret: keep ? before.secret : null,
    previousKeyId: keep ? before.secretKeyId : null,
    previousExpiresAt: keep ? now + keepPreviousMs : null,
    updatedAt: now,
  };
}

export class WebhookSettings {
  private rows = new Map<string, WebhookSettingsRow>();

  constructor(
    private readonly store: Store,
    private readonly box: SecretBox,
    private readonly write: (ops: StoreOp[]) => Promise<void>,
    private readonly log: (message: string) => void = () => undefined,
  ) {}

  /** Read every endpoint's settings again (at start, and when another replica changed some). */
  async refresh(): Promise<void> {
    const rows = new Map<string, WebhookSettingsRow>();
    for (const r of (await this.store.webhookSettings?.()) ?? []) rows.set(r.endpointId, r);
    this.rows = rows;
  }

  /** The endpoint's stored filter (comma-separated), null for the default. Synchronous: the engine asks it. */
  eventsOf(endpointId: string): string | null {
    return this.rows.get(endpointId)?.events ?? null;
  }

  view(endpointId: string, now = Date.now()): WebhookSettingsView {
    return settingsView(endpointId, this.rows.get(endpointId), now);
  }

  /** The stored row as it is now (another replica may have changed it), or a new empty one. */
  private async current(endpointId: string, now: number): Promise<WebhookSettingsRow> {
    if (!this.store.webhookSettings) return this.rows.get(endpointId) ?? emptyRow(endpointId, now);
    const [row] = await this.store.webhookSettings(endpointId);
    return row ?? emptyRow(endpointId, now);
  }

  private async put(row: WebhookSettingsRow): Promise<void> {
    await this.write([{ op: "putWebhookSettings", settings: row }]);
    this.rows.set(row.endpointId, row);
  }

  /** Set the endpoint's filter (null: back to the default). */
  async setEvents(endpointId: string, events: readonly WebhookEvent[] | null, now = Date.now()): Promise<WebhookSettingsView> {
    const row = { ...(await this.current(endpointId, now)), events: events === null ? null : eventsText(events), updatedAt: now };
    await this.put(row);
    return settingsView(endpointId, row, now);
  }

  /** Make a new signing secret (the first, or one replacing the current): its value, answered this once. */
  async rotate(endpointId: string, keepPreviousMs = DEFAULT_PREVIOUS_SECRET_MS, now = Date.now()): Promise<{ secret: string; view: WebhookSettingsView }> {
    const secret = newSigningSecret();
    const { sealed, keyId } = this.box.seal(secret, binding(endpointId));
    const row = rotatedRow(await this.current(endpointId, now), { sealed: sealed.toString("base64"), keyId }, keepPreviousMs, now);
    await this.put(row);
    return { secret, view: settingsView(endpointId, row, now) };
  }

  /**
   * The secrets that sign the endpoint's deliveries now, the current one first. An endpoint without one gets one
   * here: every delivery is signed (its owner learns a secret by rotating).
   */
  async signingSecrets(endpointId: string, now = Date.now()): Promise<string[]> {
    let row = await this.current(endpointId, now);
    if (!row.secret) {
      await this.rotate(endpointId, 0, now);
      row = await this.current(endpointId, now);
    }
    const out: string[] = [];
    const current = this.box.open(Buffer.from(row.secret!, "base64"), row.secretKeyId ?? "", binding(endpointId));
    if (current === undefined)
      this.log(
        `the webhook signing secret of endpoint ${endpointId} cannot be opened (its secrets key id ${row.secretKeyId} is not configured): its webhooks go out unsigned until it is rotated`,
      );
    else out.push(current);
    if (row.previousSecret && row.previousExpiresAt !== null && row.previousExpiresAt > now) {
      const previous = this.box.open(Buffer.from(row.previousSecret, "base64"), row.previousKeyId ?? "", binding(endpointId));
      if (previous !== undefined) out.push(previous);
    }
    return out;
  }

  /** Seal again, under the current secrets key, the secrets sealed with a previous one. How many rows changed. */
  async reseal(now = Date.now()): Promise<number> {
    let changed = 0;
    for (const row of this.rows.values()) {
      const next = { ...row };
      for (const [value, key] of [
        ["secret", "secretKeyId"],
        ["previousSecret", "previousKeyId"],
      ] as const) {
        const sealed = row[value];
        const keyId = row[key];
        if (!sealed || keyId === this.box.currentId) continue;
        const plain = this.box.open(Buffer.from(sealed, "base64"), keyId ?? "", binding(row.endpointId));
        if (plain === undefined) continue;
        const again = this.box.seal(plain, binding(row.endpointId));
        next[value] = again.sealed.toString("base64");
        next[key] = again.keyId;
      }
      if (next.secretKeyId === row.secretKeyId && next.previousKeyId === row.previousKeyId) continue;
      await this.put({ ...next, updatedAt: now });
      changed++;
    }
    return changed;
  }
}
