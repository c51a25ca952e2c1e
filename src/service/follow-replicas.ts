// Replicas on one database: what the others change (configuration, keys, handed-off jobs) reaches this one at
// once through the change feed, and by polling while the feed is away.

import { errorMessage } from "../errors.js";
import { KeyRing } from "./keys/auth.js";
import { JobEngine } from "./engine/index.js";
import { type ServiceStorage } from "./stores.js";
import { startConfigSync } from "./cluster/config-sync.js";
import { createChangeFeed } from "./cluster/change-feed.js";
import { Webhooks } from "./webhooks/index.js";
import { HANDOFF_TOPIC } from "./store/postgres/index.js";
import { Secrets } from "./secrets/index.js";
import { EndpointRegistry } from "./endpoints/registry.js";
import type { ServiceOptions } from "./options.js";

/** Replicas re-read the configuration this often besides when the change feed tells them to. */
export const CONFIG_POLL_MS = 5_000;
/**
 * Replicas on one database (PostgreSQL): what the others change reaches this one within a second (the change
 * feed's notices, polling where they are lost), and `/run` jobs they write are adopted by the replica serving
 * jobs. On SQLite there is no other replica: nothing to follow, and adopting finds nothing.
 */
export function followReplicas(r: {
  options: ServiceOptions;
  storage: ServiceStorage;
  secrets: Secrets;
  webhooks: Pick<Webhooks, "settings">;
  keyring: KeyRing;
  engine: JobEngine;
  endpoints: EndpointRegistry;
  log(message: string): void;
}) {
  const { options, storage, secrets, webhooks, keyring, engine, endpoints, log } = r;
  // What other replicas on the same database change reaches this one within a second.
  const configSync =
    storage.kind === "postgres"
      ? startConfigSync({
          endpoints,
          storedEndpoints: () => storage.store.endpoints(),
          localWritesSettled: () => engine.settled(),
          dropped: (id) => engine.dropEndpoint(id),
          reload: async () => {
            await storage.reload();
            secrets.refresh();
            await webhooks.settings.refresh();
          },
          onError: (err) => log(`could not read what other replicas changed: ${errorMessage(err)}`),
          // The change feed below says when; this only covers notices lost while its listener reconnected.
          intervalMs: CONFIG_POLL_MS,
        })
      : undefined;
  // Configuration and key changes, told at their commit by the database (schema.ts's triggers): read at once.
  let feedFailing = false;
  const feed =
    configSync && options.storeUrl && storage.coordination
      ? createChangeFeed({
          url: options.storeUrl,
          db: storage.coordination,
          onError: (err) => {
            // Said once per outage: the listener retries every 2 s at most, and polling covers it meanwhile.
            if (!feedFailing)
              log(
                `not hearing of other replicas' changes at once (${errorMessage(err)}); reading them every ${CONFIG_POLL_MS / 1000} s until the database answers`,
              );
            feedFailing = true;
          },
        })
      : undefined;
  feed?.subscribe("config", () => void configSync?.round());
  feed?.subscribe("keys", () => keyring.forget());
  // `/run` jobs another replica wrote, told after their commit: the replica serving jobs adopts them
  // (engine/handoff.ts; a no-op on the others).
  let adoptFailing = false;
  const adoptHandedOff = (adopt: () => Promise<number> = () => engine.adoptHandedOff()) =>
    void adopt().then(
      () => (adoptFailing = false),
      (err: unknown) => {
        // Said once per outage: the jobs stay in the database, marked, and the next notice or rescan adopts them.
        if (!adoptFailing) log(`could not take the jobs other replicas handed off: ${errorMessage(err)}`);
        adoptFailing = true;
      },
    );
  feed?.subscribe(HANDOFF_TOPIC, () => adoptHandedOff(() => engine.adoptHandedOff({ announced: true })));
  // Notices sent while the listener was away are lost: read everything again once it is back.
  feed?.onResync(() => {
    feedFailing = false;
    keyring.forget();
    void configSync?.round();
    adoptHandedOff();
  });
  return { configSync, feed, adoptHandedOff };
}
