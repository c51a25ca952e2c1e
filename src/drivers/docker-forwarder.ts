// How containers reach a service that listens on the host's 127.0.0.1: a small TCP forwarder listens on the
// Docker network's gateway address (the host's side of the bridge) and pipes each connection to the service's
// loopback port. Containers know the gateway as the host name `svc-api` (ExtraHosts), so SVC_API_URL is
// http://svc-api:<forwarder port>. Only peers inside the network's subnet are accepted: nothing else on the
// host's other interfaces can use the forwarder to reach the loopback-only service.

import { connect, createServer, type AddressInfo, type Server, type Socket } from "node:net";
import { UserError } from "../errors.js";

/** Dotted IPv4 -> 32-bit unsigned; undefined when not IPv4 (an IPv4-mapped IPv6 address counts). */
export function ipv4ToInt(address: string): number | undefined {
  const plain = address.startsWith("::ffff:") ? address.slice(7) : address;
  const parts = plain.split(".");
  if (parts.length !== 4) return undefined;
  let value = 0;
  for (const part of parts) {
    if (!/^\d{1,3}$/.test(part) || Number(part) > 255) return undefined;
    value = value * 256 + Number(part);
  }
  return value;
}

/** Whether `address` lies in IPv4 `cidr` ("172.18.0.0/16"). Pure. */
export function inSubnet(address: string, cidr: string): boolean {
  const [base, bitsText] = cidr.split("/");
  const ip = ipv4ToInt(address);
  const net = base === undefined ? undefined : ipv4ToInt(base);
  const bits = Number(bitsText ?? "32");
  if (ip === undefined || net === undefined || !Number.isInteger(bits) || bits < 0 || bits > 32) return false;
  const size = 2 ** (32 - bits);
  return Math.floor(ip / size) === Math.floor(net / size);
}

export interface Forwarder {
  /** The address containers connect to (the gateway) and the port it listens on. */
  host: string;
  port: number;
  /** Connections refused because they came from outside the subnet. */
  readonly refused: number;
  close(): Promise<void>;
}

export async function startForwarder(options: { listenHost: string; subnet: string; targetHost: string; targetPort: number }): Promise<Forwarder> {
  const sockets = new Set<Socket>();
  let refused = 0;
  const server: Server = createServer((client) => {
    if (!inSubnet(client.remoteAddress ?? "", options.subnet)) {
      refused++;
      client.destroy();
      return;
    }
    const upstream = connect(options.targetPort, options.targetHost);
    sockets.add(client);
    sockets.add(upstream);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on("error", drop).on("close", drop);
    upstream.on("error", drop).on("close", drop);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", (err: NodeJS.ErrnoException) => {
      reject(
        err.code === "EADDRINUSE"
          ? new UserError(`Cannot listen on ${options.listenHost} for workers: the port is in use`, { cause: err })
          : new UserError(`Cannot listen on the Docker network's gateway ${options.listenHost} for workers (${err.code ?? err.message})`, {
              hint: "The gateway address belongs to the Docker bridge on this host; is the engine running on another machine (DOCKER_HOST)?",
              cause: err,
            }),
      );
    });
    server.listen(0, options.listenHost, () => resolve());
  });
  return {
    host: options.listenHost,
    port: (server.address() as AddressInfo).port,
    get refused() {
      return refused;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
