import { describe, expect, it } from "vitest";
import { createServer } from "node:net";
import { containerIsolationFinding, crashLoopFindings, modelCacheFindings, portFinding, sandboxFinding } from "./checks.js";

describe("portFinding", () => {
  it("a port held by the service the CLI reached on this machine is fine; held by something else, a warning", async () => {
    const holder = createServer();
    await new Promise<void>((r) => holder.listen(0, "127.0.0.1", r));
    const port = (holder.address() as { port: number }).port;
    try {
      expect(await portFinding(port, "svc server's default port", `http://127.0.0.1:${port}`)).toEqual({
        check: `port ${port}`,
        level: "ok",
        detail: `in use by the service above (http://127.0.0.1:${port})`,
      });
      expect(await portFinding(port, "svc server's default port", `http://localhost:${port}/`)).toMatchObject({ level: "ok" });
      // Reached elsewhere, or not reached: what holds the port here is unknown.
      expect(await portFinding(port, "svc server's default port", `https://svc.example.com:${port}`)).toMatchObject({ level: "warn" });
      expect(await portFinding(port, "svc server's default port")).toMatchObject({ level: "warn", fix: expect.stringContaining("ss -ltnp") });
    } finally {
      holder.close();
    }
  });
});

describe("containerIsolationFinding", () => {
  const runc = { DefaultRuntime: "runc", Runtimes: { runc: {}, "io.containerd.runc.v2": {} } };
  const withGvisor = { DefaultRuntime: "runc", Runtimes: { runc: {}, runsc: {} } };

  it("says Docker workers share the host's kernel under runc, and how to give each its own", () => {
    const finding = containerIsolationFinding(runc, undefined);
    expect(finding).toMatchObject({ check: "containers", level: "info" });
    expect(finding.detail).toBe(
      "Docker workers run under runc: uid 1000, no capabilities, no-new-privileges, read-only root, bounded /tmp, process/memory/CPU limits; the host's kernel is shared with every worker",
    );
    expect(finding.fix).toMatch(/apt-get install runsc, scripts\/ensure-docker\.sh .*--docker-runtime runsc/);
    // gVisor registered but not chosen: the fix names it.
    expect(containerIsolationFinding(withGvisor, undefined).fix).toMatch(
      /^gVisor is registered as "runsc": svc server --workers docker --docker-runtime runsc/,
    );
  });

  it("is ok under gVisor, chosen by SVC_DOCKER_RUNTIME or as the engine's default", () => {
    expect(containerIsolationFinding(withGvisor, "runsc")).toMatchObject({
      level: "ok",
      detail: expect.stringMatching(/^Docker workers run under runsc \(gVisor: a kernel of its own per container\)/),
    });
    expect(containerIsolationFinding({ DefaultRuntime: "runsc", Runtimes: { runsc: {} } }, undefined).level).toBe("ok");
  });

  it("warns when SVC_DOCKER_RUNTIME names a runtime the engine lacks: workers would not start", () => {
    const finding = containerIsolationFinding(runc, "runsc");
    expect(finding).toMatchObject({
      level: "warn",
      detail: expect.stringMatching(/^SVC_DOCKER_RUNTIME=runsc, but the engine has no such runtime \(it has: runc, io\.containerd\.runc\.v2\)/),
    });
    expect(finding.fix).toMatch(/ensure-docker\.sh/);
    expect(containerIsolationFinding(undefined, "runsc").level).toBe("info");
  });
});

describe("sandboxFinding", () => {
  it("warns when sandboxed workers share the host's network, saying why and what to install", () => {
    const described = (network: string) => () => ({ kind: "bwrap" as const, description: `sandbox bwrap (user/mount/pid namespaces, seccomp, ${network})` });
    expect(sandboxFinding("auto", described("outbound network through pasta")).level).toBe("ok");
    const host = sandboxFinding("auto", described("the host's network: pasta (Debian's passt) is not installed"));
    expect(host).toMatchObject({
      level: "warn",
      detail: expect.stringMatching(/pasta \(Debian's passt\) is not installed\): workers can reach the host's 127\.0\.0\.1/),
    });
    expect(host.fix).toMatch(/apt-get install passt/);
  });
});

describe("crashLoopFindings", () => {
  it("lists each endpoint whose workers keep dying, with the command that shows why; ok when none", () => {
    expect(crashLoopFindings([{ id: "e1", name: "a" }])).toEqual([
      { check: "crash loops", level: "ok", detail: "no endpoint's workers keep dying (1 endpoint(s))" },
    ]);
    const [f] = crashLoopFindings([
      { id: "e1", name: "a" },
      {
        id: "e2",
        name: "b",
        app: "shop",
        environment: "prod",
        statusReason: "workers keep dying: 3 in 2 min, last: exited with code 1; next start in 2 s",
        crashLoop: { deaths: 3, lastDeath: { message: "exited with code 1" } },
      },
    ]);
    expect(f).toMatchObject({
      level: "warn",
      detail: "endpoint b (e2, shop/prod): workers keep dying: 3 in 2 min, last: exited with code 1; next start in 2 s",
    });
    expect(f!.fix).toContain("svc logs b --app shop --env prod");
  });
});

describe("modelCacheFindings", () => {
  it("says the cache's size against its limit, each fetch under way, and each failure with what to do", () => {
    const findings = modelCacheFindings({
      hub: "https://hub.example",
      usedBytes: 120e6,
      limitBytes: 1e9,
      models: [
        { model: "acme/a@main", state: "ready", bytes: 120e6, inUse: 1 },
        { model: "acme/b@main", state: "fetching", doneBytes: 50e6, totalBytes: 200e6, inUse: 0 },
        { model: "acme/c@main", state: "failed", inUse: 0, error: { code: "unauthorized", message: "the hub refused it (401)" } },
      ],
    });
    expect(findings).toEqual([
      { check: "model cache", level: "ok", detail: "1 model(s), 120 MB of 1000 MB, from https://hub.example" },
      { check: "model cache", level: "info", detail: "fetching model acme/b@main: 50 MB of 200 MB" },
      {
        check: "model cache",
        level: "warn",
        detail: "model acme/c@main cannot be fetched (unauthorized): the hub refused it (401)",
        fix: "Give the service a token of the hub that may read it (SVC_MODEL_HUB_TOKEN).",
      },
    ]);
    expect(modelCacheFindings({ hub: null, usedBytes: 0, limitBytes: null, models: [] })[0]!.level).toBe("info");
  });
});
