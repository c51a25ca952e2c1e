// The webhook address rules: which addresses are refused and by which rule, the spellings the URL parser folds into
// them, the operator's allow-list, the service's own listener, and the socket lookup that checks what it connects to.
import { describe, expect, it } from "vitest";
import type { LookupAddress } from "node:dns";
import { classifyAddress, parseWebhookAllow, allowsAddress, allowsName, WebhookAddressPolicy, WebhookRefused } from "./address-policy.js";

describe("classifyAddress", () => {
  it.each([
    ["127.0.0.1", "loopback"],
    ["127.255.0.9", "loopback"],
    ["10.1.2.3", "private"],
    ["172.16.0.1", "private"],
    ["172.31.255.255", "private"],
    ["192.168.1.1", "private"],
    ["100.64.0.1", "private"],
    ["100.127.255.254", "private"],
    ["169.254.169.254", "link-local"],
    ["0.0.0.0", "unspecified"],
    ["0.1.2.3", "unspecified"],
    ["224.0.0.1", "multicast"],
    ["239.255.255.250", "multicast"],
    ["255.255.255.255", "broadcast"],
    ["240.0.0.1", "reserved"],
    ["192.0.2.10", "reserved"],
    ["198.18.0.1", "reserved"],
    ["::1", "loopback"],
    ["[::1]", "loopback"],
    ["::", "unspecified"],
    ["::ffff:127.0.0.1", "loopback"],
    ["::ffff:7f00:1", "loopback"],
    ["[::ffff:7f00:1]", "loopback"],
    ["::ffff:10.0.0.1", "private"],
    ["::ffff:169.254.169.254", "link-local"],
    ["::127.0.0.1", "loopback"],
    ["::ffff:0:127.0.0.1", "loopback"],
    ["64:ff9b::7f00:1", "loopback"],
    ["64:ff9b::a9fe:a9fe", "link-local"],
    ["2002:7f00:1::1", "loopback"],
    ["2002:c0a8:101::1", "private"],
    ["fe80::1", "link-local"],
    ["fe80::1%eth0", "link-local"],
    ["fc00::1", "unique-local"],
    ["fd12:3456::1", "unique-local"],
    ["fec0::1", "private"],
    ["ff02::1", "multicast"],
    ["2001:db8::1", "reserved"],
    ["100::1", "reserved"],
  ])("%s is %s", (address, rule) => {
    expect(classifyAddress(address)).toBe(rule);
  });

  it.each(["8.8.8.8", "1.1.1.1", "172.32.0.1", "100.128.0.1", "192.169.0.1", "2606:4700:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1"])(
    "%s is public",
    (address) => {
      expect(classifyAddress(address)).toBeUndefined();
    },
  );

  it("leaves names alone: they are checked once resolved", () => {
    expect(classifyAddress("localhost")).toBeUndefined();
    expect(classifyAddress("example.com")).toBeUndefined();
  });
});

describe("WebhookAddressPolicy.literal (at submit)", () => {
  const policy = new WebhookAddressPolicy({ hostAddresses: () => [] });

  it.each([
    "http://127.0.0.1:9/hook",
    "http://[::1]:9/hook",
    "http://[::ffff:127.0.0.1]:9/hook",
    "http://2130706433:9/hook",
    "http://127.1:9/hook",
    "http://0x7f000001:9/hook",
    "http://0x7f.1:9/hook",
    "http://017700000001:9/hook",
    "http://0177.0.0.1:9/hook",
    "https://127.0.0.1./hook",
  ])("refuses %s as loopback, whatever its spelling", (url) => {
    expect(policy.literal(url)).toEqual({
      rule: "loopback",
      message: expect.stringMatching(
        /^refused by the webhook rule "loopback": 127\.0\.0\.1 is a loopback address|^refused by the webhook rule "loopback": ::(ffff:7f00:)?1 is a loopback address/,
      ),
    });
  });

  it("refuses other schemes, private and link-local literals; names pass (checked at connect time)", () => {
    expect(policy.literal("ftp://example.com/x")?.rule).toBe("scheme");
    expect(policy.literal("file:///etc/passwd")?.rule).toBe("scheme");
    expect(policy.literal("http://169.254.169.254/latest/meta-data")?.rule).toBe("link-local");
    expect(policy.literal("http://10.0.0.1/")?.rule).toBe("private");
    expect(policy.literal("http://[fd00::1]/")?.rule).toBe("unique-local");
    expect(policy.literal("http://0.0.0.0:8600/")?.rule).toBe("unspecified");
    expect(policy.literal("http://localhost:9/")).toBeUndefined();
    expect(policy.literal("https://hooks.example.com/x")).toBeUndefined();
    expect(policy.literal("https://8.8.8.8/x")).toBeUndefined();
  });
});

describe("the allow-list", () => {
  it("takes CIDRs, addresses, names and *.domain, and says what is none of them", () => {
    const { allow, problems } = parseWebhookAllow(["10.0.0.0/8", "fd00::/8", "192.168.1.5", "hooks.internal", "*.corp.example", "Hooks.Example.", " "]);
    expect(problems).toEqual([]);
    expect(allow.names).toEqual(["hooks.internal", "hooks.example"]);
    expect(allow.domains).toEqual(["corp.example"]);
    expect(parseWebhookAllow(["10.0.0.0/33", "nope/8", "bad host", "fd00::/129"]).problems).toEqual([
      '"10.0.0.0/33" has no valid prefix length (0-32)',
      '"nope/8" is not an address range (like 10.0.0.0/8 or fd00::/8)',
      '"bad host" is not an address, an address range or a host name',
      '"fd00::/129" has no valid prefix length (0-128)',
    ]);
  });

  it("matches addresses by range (IPv4 carried in IPv6 as the IPv4) and names exactly or under a domain", () => {
    const { allow } = parseWebhookAllow(["10.0.0.0/8", "fd00::/8", "192.168.1.5", "hooks.internal", "*.corp.example"]);
    expect(allowsAddress(allow, "10.9.8.7")).toBe(true);
    expect(allowsAddress(allow, "::ffff:10.9.8.7")).toBe(true);
    expect(allowsAddress(allow, "11.0.0.1")).toBe(false);
    expect(allowsAddress(allow, "fd12::1")).toBe(true);
    expect(allowsAddress(allow, "fc00::1")).toBe(false);
    expect(allowsAddress(allow, "192.168.1.5")).toBe(true);
    expect(allowsAddress(allow, "192.168.1.6")).toBe(false);
    expect(allowsName(allow, "hooks.internal")).toBe(true);
    expect(allowsName(allow, "HOOKS.internal.")).toBe(true);
    expect(allowsName(allow, "evil.hooks.internal")).toBe(false);
    expect(allowsName(allow, "a.corp.example")).toBe(true);
    expect(allowsName(allow, "corp.example")).toBe(false);
    expect(allowsName(allow, "acorp.example")).toBe(false);
  });

  it("admits what it lists, and nothing admits the service's own listener", () => {
    const policy = new WebhookAddressPolicy({
      allow: ["127.0.0.0/8", "hooks.internal"],
      self: () => ({ host: "127.0.0.1", port: 8600, urls: ["http://127.0.0.1:8600"] }),
      hostAddresses: () => [],
    });
    expect(policy.literal("http://127.0.0.1:9000/hook")).toBeUndefined();
    expect(policy.literal("http://127.0.0.1:8600/v2/x/run")?.rule).toBe("service");
    expect(policy.literal("http://[::ffff:127.0.0.1]:8600/")?.rule).toBe("service");
    expect(policy.address("hooks.internal", "10.0.0.1", 80)).toBeUndefined();
    expect(policy.address("other.internal", "10.0.0.1", 80)?.rule).toBe("private");
    expect(policy.address("hooks.internal", "127.0.0.1", 8600)?.rule).toBe("service");
    expect(() => new WebhookAddressPolicy({ allow: ["10.0.0.0/40"] })).toThrow(/allow-list is not valid/);
  });

  it("refuses this host's own addresses, and every one of them on the service's port when it listens on all", () => {
    const policy = new WebhookAddressPolicy({
      self: () => ({ host: "0.0.0.0", port: 8600, urls: [] }),
      hostAddresses: () => ["127.0.0.1", "203.0.113.7", "8.8.4.4"],
    });
    expect(policy.address("8.8.4.4", "8.8.4.4", 443)?.rule).toBe("this-host");
    expect(policy.address("8.8.4.4", "8.8.4.4", 8600)?.rule).toBe("service");
    expect(policy.address("8.8.8.8", "8.8.8.8", 8600)).toBeUndefined();
    const open = new WebhookAddressPolicy({ allow: ["8.8.4.4"], self: () => ({ host: "0.0.0.0", port: 8600, urls: [] }), hostAddresses: () => ["8.8.4.4"] });
    expect(open.address("8.8.4.4", "8.8.4.4", 443)).toBeUndefined();
    expect(open.address("8.8.4.4", "8.8.4.4", 8600)?.rule).toBe("service");
  });
});

describe("lookupFor (at connect time)", () => {
  const answers: Record<string, LookupAddress[]> = {
    "public.test": [
      { address: "8.8.8.8", family: 4 },
      { address: "2606:4700::1111", family: 6 },
    ],
    localtest: [{ address: "127.0.0.1", family: 4 }],
    "mixed.test": [
      { address: "8.8.8.8", family: 4 },
      { address: "::ffff:169.254.169.254", family: 6 },
    ],
  };
  // A fake resolver: these names have no DNS records anywhere.
  const fakeLookup = async (name: string) => answers[name] ?? Promise.reject(Object.assign(new Error(`getaddrinfo ENOTFOUND ${name}`), { code: "ENOTFOUND" }));
  const policy = new WebhookAddressPolicy({ lookup: fakeLookup, hostAddresses: () => [] });
  const look = (name: string, options: { all?: boolean; family?: number }) =>
    new Promise<{ err: NodeJS.ErrnoException | null; address: unknown; family?: number }>((resolve) =>
      policy.lookupFor(new URL(`http://${name}/`))(name, options, (err, address, family) => resolve({ err, address, family })),
    );

  it("hands the socket the checked addresses", async () => {
    expect(await look("public.test", { all: true })).toMatchObject({ err: null, address: answers["public.test"] });
    expect(await look("public.test", {})).toMatchObject({ err: null, address: "8.8.8.8", family: 4 });
    expect(await look("public.test", { family: 6 })).toMatchObject({ err: null, address: "2606:4700::1111", family: 6 });
  });

  it("refuses a name resolving to a refused address, naming the rule, and one with any refused address among others", async () => {
    const local = await look("localtest", { all: true });
    expect(local.err).toBeInstanceOf(WebhookRefused);
    expect(local.err).toMatchObject({
      rule: "loopback",
      message:
        'refused by the webhook rule "loopback": localtest resolves to 127.0.0.1, a loopback address; webhooks go to public addresses unless the operator allows others (--webhook-allow)',
    });
    expect((await look("mixed.test", {})).err).toMatchObject({ rule: "link-local" });
    expect((await look("nowhere.test", {})).err).toMatchObject({ code: "ENOTFOUND" });
  });
});
