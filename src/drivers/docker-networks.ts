// The Docker driver's networks and forwarders: a bridge network per app/environment (or per session) that worker
// containers sit on, and on its gateway a forwarder to the service on the host's loopback (docker-forwarder.ts),
// which containers reach as `svc-api`. Apart from the driver (docker.ts) because fresh and pre-booted containers
// share them, and because they outlive any one container: they go at the driver's close.

import type Docker from "dockerode";
import { UserError } from "../errors.js";
import { dockerMessage, dockerStatus, LABELS, memo } from "./docker-engine.js";
import { startForwarder, type Forwarder } from "./docker-forwarder.js";
import type { WorkerLaunch } from "./types.js";

/** A network the driver's containers use, as the engine describes it. */
export interface NetworkState {
  name: string;
  id: string;
  gateway: string;
  subnet: string;
  /** Whether this driver created it (another driver may have, for the same app/environment). */
  created: boolean;
}

export interface DockerNetworks {
  /** The network `name`, found or created (labelled with the launch's app and environment when per app/env). */
  networkFor(name: string, launch: Pick<WorkerLaunch, "app" | "env"> | undefined): Promise<NetworkState>;
  /** Forget what is known of network `name` (another driver removed it): the next networkFor makes it again. */
  forget(name: string): void;
  /** The forwarder on `network`'s gateway to the service at `apiUrl` (on the host's loopback). */
  forwarderFor(network: NetworkState, apiUrl: string): Promise<Forwarder>;
  /** Close every forwarder. */
  closeForwarders(): Promise<void>;
  /** Remove the networks used, where nothing else is attached (`log` says why one stays). */
  removeNetworks(docker: Docker, log: (message: string) => void): Promise<void>;
}

export function createDockerNetworks(options: {
  engine: () => Promise<Docker>;
  session: string;
  scope: "app-env" | "session";
  /** Extra labels on the networks created. */
  labels?: Record<string, string>;
}): DockerNetworks {
  const { engine, session } = options;
  const networks = new Map<string, Promise<NetworkState>>();
  const forwarders = new Map<string, Promise<Forwarder>>();
  return {
    networkFor: (name, launch) =>
      memo(networks, name, async () => {
        const docker = await engine();
        let created = false;
        let info: Docker.NetworkInspectInfo;
        try {
          info = (await docker.getNetwork(name).inspect()) as Docker.NetworkInspectInfo;
        } catch (err) {
          if (dockerStatus(err) !== 404) throw err;
          const labels: Record<string, string> = { ...options.labels, [LABELS.managed]: "true", [LABELS.session]: session };
          if (options.scope === "app-env" && launch) Object.assign(labels, { [LABELS.app]: launch.app, [LABELS.env]: launch.env });
          try {
            await docker.createNetwork({ Name: name, Driver: "bridge", CheckDuplicate: true, Labels: labels });
            created = true;
          } catch (createErr) {
            // Another driver created it meanwhile: use theirs.
            if (dockerStatus(createErr) !== 409) throw createErr;
          }
          info = (await docker.getNetwork(name).inspect()) as Docker.NetworkInspectInfo;
        }
        const ipam = info.IPAM?.Config?.find((c) => c.Gateway && c.Subnet && !c.Subnet.includes(":"));
        if (!ipam?.Gateway || !ipam.Subnet) throw new UserError(`Docker network ${name} has no IPv4 gateway; svc cannot connect its workers to the service`);
        return { name, id: info.Id, gateway: ipam.Gateway, subnet: ipam.Subnet, created };
      }),
    forget(name) {
      networks.delete(name);
    },
    forwarderFor(network, apiUrl) {
      const target = new URL(apiUrl);
      const port = Number(target.port || (target.protocol === "https:" ? 443 : 80));
      const targetHost = target.hostname.replace(/^\[|\]$/g, "");
      return memo(forwarders, `${network.name}|${targetHost}|${port}`, () =>
        startForwarder({
          listenHost: network.gateway,
          subnet: network.subnet,
          targetHost: targetHost === "localhost" ? "127.0.0.1" : targetHost,
          targetPort: port,
        }),
      );
    },
    async closeForwarders() {
      await Promise.all(
        [...forwarders.values()].map((f) => f.then((fw) => fw.close()).catch(() => undefined /* a forwarder that never started has nothing to close */)),
      );
      forwarders.clear();
    },
    async removeNetworks(docker, log) {
      // Networks this driver used go when nothing else is attached (the engine refuses otherwise: another
      // driver still uses the shared app/env network, and removes it when it closes).
      for (const pending of networks.values()) {
        const network = await pending.catch(() => undefined /* never made: nothing to remove */);
        if (!network) continue;
        await docker
          .getNetwork(network.id)
          .remove()
          .catch((err: unknown) => {
            if (dockerStatus(err) !== 404 && network.created) log(`left Docker network ${network.name} in place: ${dockerMessage(err)}`);
          });
      }
      networks.clear();
    },
  };
}
