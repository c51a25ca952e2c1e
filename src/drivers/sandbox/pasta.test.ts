import { expect, it } from "vitest";
import { loopbackPort, pastaArgs } from "./pasta.js";

it("connects the namespace forwarding only the job API's port to the host, no gateway mapping, no inbound port", () => {
  const args = pastaArgs(4242, [8700], "/run/p.pid");
  expect(args).toContain("--no-map-gw");
  expect(args).toContain("--config-net");
  const value = (flag: string) => args[args.indexOf(flag) + 1];
  expect([value("--tcp-ports"), value("--udp-ports"), value("--tcp-ns"), value("--udp-ns")]).toEqual(["none", "none", "8700", "none"]);
  expect(args.at(-1)).toBe("4242");
  expect(value("--tcp-ns")).not.toBe("auto");
  expect(pastaArgs(1, [], "/p")[pastaArgs(1, [], "/p").indexOf("--tcp-ns") + 1]).toBe("none");
});

it("run by root: pasta keeps root and enters the sandbox's network namespace alone, by its path", () => {
  const args = pastaArgs(4242, [8700, 8701], "/run/p.pid", true);
  expect(args.slice(-4)).toEqual(["--runas", "0", "--netns", "/proc/4242/ns/net"]);
  expect(args).not.toContain("4242");
  expect(args[args.indexOf("--tcp-ns") + 1]).toBe("8700,8701");
});

it("finds the job API's port on the host's loopback, and none elsewhere", () => {
  expect(loopbackPort("http://127.0.0.1:8700")).toBe(8700);
  expect(loopbackPort("http://localhost:3000/x")).toBe(3000);
  expect(loopbackPort("http://svc.internal:8700")).toBeUndefined();
  expect(loopbackPort("not a url")).toBeUndefined();
});
