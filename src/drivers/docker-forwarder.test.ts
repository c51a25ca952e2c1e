import { connect, createServer, type AddressInfo, type Server } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { inSubnet, ipv4ToInt, startForwarder, type Forwarder } from "./docker-forwarder.js";

describe("inSubnet", () => {
  it("matches IPv4 addresses (also IPv4-mapped IPv6) against a CIDR", () => {
    expect(ipv4ToInt("172.18.0.2")).toBe(172 * 2 ** 24 + 18 * 2 ** 16 + 2);
    expect(inSubnet("172.18.0.2", "172.18.0.0/16")).toBe(true);
    expect(inSubnet("::ffff:172.18.200.9", "172.18.0.0/16")).toBe(true);
    expect(inSubnet("172.19.0.2", "172.18.0.0/16")).toBe(false);
    expect(inSubnet("10.0.0.1", "10.0.0.0/32")).toBe(false);
    expect(inSubnet("127.0.0.1", "0.0.0.0/0")).toBe(true);
    expect(inSubnet("::1", "172.18.0.0/16")).toBe(false);
    expect(inSubnet("999.1.1.1", "0.0.0.0/0")).toBe(false);
  });
});

describe("startForwarder (real TCP on 127.0.0.1)", () => {
  let upstream: Server | undefined;
  let forwarder: Forwarder | undefined;
  afterEach(async () => {
    await forwarder?.close();
    await new Promise<void>((resolve) => (upstream ? upstream.close(() => resolve()) : resolve()));
    forwarder = upstream = undefined;
  });

  const echoServer = async () => {
    upstream = createServer((socket) => socket.on("data", (data) => socket.write(`echo:${data}`)));
    await new Promise<void>((resolve) => upstream!.listen(0, "127.0.0.1", resolve));
    return (upstream.address() as AddressInfo).port;
  };
  const exchange = (port: number, text: string) =>
    new Promise<string>((resolve) => {
      const socket = connect(port, "127.0.0.1");
      let got = "";
      socket.on("data", (d) => {
        got += d;
        if (got.endsWith(text)) socket.end();
      });
      socket.on("close", () => resolve(got));
      socket.on("error", () => resolve(got));
      socket.write(text);
    });

  it("pipes connections from inside the subnet to the target", async () => {
    const targetPort = await echoServer();
    forwarder = await startForwarder({ listenHost: "127.0.0.1", subnet: "127.0.0.0/8", targetHost: "127.0.0.1", targetPort });
    expect(forwarder.port).not.toBe(targetPort);
    expect(await exchange(forwarder.port, "ping")).toBe("echo:ping");
    expect(forwarder.refused).toBe(0);
  });

  it("drops connections from outside the subnet", async () => {
    const targetPort = await echoServer();
    forwarder = await startForwarder({ listenHost: "127.0.0.1", subnet: "172.18.0.0/16", targetHost: "127.0.0.1", targetPort });
    expect(await exchange(forwarder.port, "ping")).toBe("");
    expect(forwarder.refused).toBe(1);
  });

  it("says why it cannot listen on an address this host does not have", async () => {
    await expect(startForwarder({ listenHost: "192.0.2.123", subnet: "192.0.2.0/24", targetHost: "127.0.0.1", targetPort: 1 })).rejects.toThrow(
      /gateway 192\.0\.2\.123/,
    );
  });
});
