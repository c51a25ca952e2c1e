// Two tenants on one `svc server`, with process workers (sandboxed) and with Docker workers: user B deploys a secret, a volume holding a
// file, a load-balanced endpoint with a private route and queued jobs; user A deploys, with `svc deploy`, handlers
// that go looking (fixtures/tenant-attacker). Every attempt must fail, and B's endpoints must go on answering
// with B's own results. Everything runs for real: the `svc` binary, the server as its own process, bwrap.

import { spawnSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LABELS } from "../../src/drivers/docker-engine.js";
import { docker, engineUp } from "../docker/engine.js";
import { startServerProcess, type ServerProcess } from "../server-process.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const bin = join(repo, "bin", "svc.js");
const ADMIN = "tenants-e2e-operator-key";
const B_SECRET = "b_secret_4111111111111111_value";
const B_FILE = "B's volume file: model weights";
/** Stands for the operator's cloud credentials in the service's environment, which no worker may inherit. */
const OPERATOR_ENV = { OPERATOR_CLOUD_TOKEN: "operator-cloud-token-value" };

function tenantSuite(workers: "process" | "docker") {
  /** TCP ports a victim endpoint's worker processes listen on, read from the host's /proc (fd -> socket inode). */
  function victimListeningPorts(endpointName: string): number[] {
    const ports = new Set<number>();
    for (const pid of readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
      try {
        const environ = readFileSync(`/proc/${pid}/environ`, "utf8").split("\0");
        if (!environ.includes("SVC_APP=tenant-victim") || !environ.includes(`SVC_ENDPOINT_NAME=${endpointName}`)) continue;
        const inodes = new Set<string>();
        for (const fd of readdirSync(`/proc/${pid}/fd`)) {
          const link = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
          if (link) inodes.add(link[1]!);
        }
        // Its own network namespace's sockets (a sandboxed worker's is its own; pasta forwards the same port on the
        // host's loopback, where the service reaches it and a neighbour would try it).
        for (const file of [`/proc/${pid}/net/tcp`, `/proc/${pid}/net/tcp6`]) {
          for (const line of readFileSync(file, "utf8").split("\n").slice(1)) {
            const cols = line.trim().split(/\s+/);
            if (cols[3] === "0A" && inodes.has(cols[9]!)) ports.add(parseInt(cols[1]!.split(":")[1]!, 16));
          }
        }
      } catch {
        // gone, or not a process of ours
      }
    }
    return [...ports];
  }

  /** Where B's containers listen on their network (Docker workers): what a neighbour container could try. */
  async function victimContainerAddresses(): Promise<string[]> {
    if (workers !== "docker") return [];
    const containers = await docker.listContainers({ filters: { label: [`${LABELS.app}=tenant-victim`] } });
    return containers.flatMap((c) => Object.values(c.NetworkSettings?.Networks ?? {}).map((n) => `${n.IPAddress}:8080`)).filter((a) => !a.startsWith(":"));
  }

  let work: string;
  let dataDir: string;
  let server: ServerProcess;
  let url: string;
  const keys: Record<"a" | "b" | "aWrite", string> = { a: "", b: "", aWrite: "" };
  const endpoints: Record<string, { id: string; url: string; type: string }> = {};
  let bVolumeId: string;
  let queuedJobs: string[] = [];

  function project(fixture: string, name = fixture): string {
    const dir = join(work, name);
    cpSync(join(repo, "fixtures", fixture), dir, { recursive: true });
    mkdirSync(join(dir, "node_modules"), { recursive: true });
    symlinkSync(join(repo, "packages", "svc"), join(dir, "node_modules", "svc"), "dir");
    return dir;
  }

  function svc(cwd: string, key: string, args: string[], input?: string) {
    const base: NodeJS.ProcessEnv = { ...process.env, CI: "true" };
    for (const k of Object.keys(base)) if (k.startsWith("SVC_")) delete base[k];
    const r = spawnSync(process.execPath, [bin, ...args], {
      cwd,
      env: { ...base, SVC_API_URL: url, SVC_API_KEY: key },
      input,
      encoding: "utf8",
      timeout: 180_000,
    });
    return { status: r.status, stdout: r.stdout, stderr: r.stderr };
  }

  async function api(key: string, method: string, path: string, body?: unknown) {
    const res = await fetch(`${path.startsWith("http") ? "" : url}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    let parsed: any;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = text;
    }
    return { status: res.status, text, body: parsed, headers: res.headers };
  }

  function deploy(dir: string, key: string) {
    const r = svc(dir, key, ["deploy", "--env", "prod", "--json"]);
    if (r.status !== 0) return { ok: false as const, ...r };
    for (const e of JSON.parse(r.stdout).endpoints) endpoints[e.name] = e;
    return { ok: true as const, ...r };
  }

  /** Host pids of the processes whose environment names the app (the workers, and a sandbox's own process). */
  function pidsOfApp(app: string): number[] {
    const pids: number[] = [];
    for (const pid of readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
      try {
        if (readFileSync(`/proc/${pid}/environ`, "utf8").split("\0").includes(`SVC_APP=${app}`)) pids.push(Number(pid));
      } catch {
        // gone, or not ours
      }
    }
    return pids;
  }

  async function until<T>(probe: () => Promise<T | undefined | false>, timeoutMs = 30_000): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const v = await probe();
      if (v) return v;
      if (Date.now() > deadline) throw new Error("condition not met in time");
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), `svc-tenants-${workers}-`));
    dataDir = join(work, "data");
    server = await startServerProcess({ dataDir, workers, env: { SVC_API_KEY: ADMIN, ...OPERATOR_ENV } });
    url = server.url;

    for (const [user, scopes, slot] of [
      ["user-b", ["admin"], "b"],
      ["user-a", ["admin"], "a"],
      ["user-a", ["management:read", "management:write"], "aWrite"],
    ] as const) {
      const created = await api(ADMIN, "POST", "/v1/keys", { userId: user, scopes, name: `${user} ${slot}` });
      expect(created.status, created.text).toBe(201);
      keys[slot] = created.body.key;
    }

    // B: a volume, a secret, the app; a file on the volume, a job running and three waiting with card numbers.
    const volume = await api(keys.b, "POST", "/v2/network-volumes", { name: "bvol", size: 10, dataCenter: "local" });
    expect(volume.status, volume.text).toBe(201);
    bVolumeId = volume.body.id;
    const victim = project("tenant-victim");
    expect(svc(victim, keys.b, ["secret", "set", "B_SECRET", "--json"], `${B_SECRET}\n`).status).toBe(0);
    const deployed = deploy(victim, keys.b);
    expect(deployed.ok, deployed.stderr).toBe(true);
    const wrote = await api(keys.b, "POST", `${endpoints.vault!.url}/runsync`, { input: { write: B_FILE } });
    expect(wrote.body, wrote.text).toMatchObject({ status: "COMPLETED", output: { secret: B_SECRET, file: B_FILE, owner: "B" } });
    await api(keys.b, "POST", `${endpoints.cards!.url}/run`, { input: { card: "4111111111110000", holdMs: 120_000 } });
    queuedJobs = [];
    for (const card of ["4111111111111111", "5500000000000004", "340000000000009"]) {
      queuedJobs.push((await api(keys.b, "POST", `${endpoints.cards!.url}/run`, { input: { card } })).body.id);
    }

    // A: the attacker's app.
    const attacker = project("tenant-attacker");
    const attacked = deploy(attacker, keys.a);
    expect(attacked.ok, attacked.stderr).toBe(true);
    // B's private route answers through the service (its worker is up) before A looks for it.
    await until(async () => {
      const r = await api(keys.b, "GET", `${endpoints["private-api"]!.url}/private`);
      return r.status === 200 && r.body.secret === B_SECRET;
    });
  }, 300_000);

  afterAll(async () => {
    await server?.stop();
    rmSync(work, { recursive: true, force: true });
    // A service's volumes outlive it (they are its users' data); these are the test's: remove them.
    if (workers === "docker") {
      for (const app of ["tenant-victim", "tenant-attacker", "thief-by-id", "thief-by-name"]) {
        const { Volumes } = await docker.listVolumes({ filters: { label: [`${LABELS.app}=${app}`] } });
        await Promise.all((Volumes ?? []).map((v) => docker.getVolume(v.Name).remove({ force: true })));
      }
    }
  });

  describe("a tenant's handler reaches nothing of the service's or another tenant's", () => {
    let report: Record<string, any>;

    beforeAll(async () => {
      const victimPids = pidsOfApp("tenant-victim");
      expect(victimPids.length).toBeGreaterThan(0);
      const peers = await victimContainerAddresses();
      const r = await api(keys.a, "POST", `${endpoints.probe!.url}/runsync?wait=90000`, {
        input: { dataDir, servicePid: server.child.pid, victimPids, needle: B_SECRET, peers },
      });
      expect(r.body?.status, r.text).toBe("COMPLETED");
      report = r.body.output;
    }, 120_000);

    it("cannot read the service's data directory (keys, database, artifacts)", () => {
      for (const [file, outcome] of Object.entries(report.dataDir)) expect([file, outcome]).not.toEqual([file, expect.stringMatching(/^(read|listed)/)]);
    });

    it("sees no other process: no environment, no memory, no secret of B's", () => {
      expect(report.environsRead).toBe(0);
      expect(report.memOpened).toBe(0);
      expect(report.foreignTokens).toBe(0);
      expect(report.foreignApiKeys).toBe(0);
      expect(report.needleInEnviron).toBeUndefined();
    });

    it("cannot signal the service or B's workers", () => {
      for (const outcome of Object.values(report.signals)) expect(outcome).not.toBe("reachable");
    });

    it("finds no worker token to take B's jobs with, and B's jobs stay queued", async () => {
      expect(report.takenWithForeignTokens).toEqual([]);
      for (const id of queuedJobs) expect((await api(keys.b, "GET", `${endpoints.cards!.url}/status/${id}`)).body.status).toBe("IN_QUEUE");
    });

    it("cannot change B's code in any cache", () => {
      expect([report.handlersChanged, report.foreignHandlers]).toEqual([0, expect.anything()]);
    });

    it("cannot reach B's load-balanced worker around the service", () => {
      expect(report.privateRouteReached).toEqual([]);
    });

    it("gets none of the service's environment", () => {
      expect(report.envNames).not.toContain("OPERATOR_CLOUD_TOKEN");
      expect(report.envNames.filter((n: string) => n.startsWith("SVC_") && /DATA|ADMIN|SECRETS|STORE/.test(n))).toEqual([]);
    });

    it("leaves B's endpoints answering with B's own results", async () => {
      const vault = await api(keys.b, "POST", `${endpoints.vault!.url}/runsync`, { input: {} });
      expect(vault.body).toMatchObject({ status: "COMPLETED", output: { secret: B_SECRET, file: B_FILE, owner: "B" } });
      const route = await api(keys.b, "GET", `${endpoints["private-api"]!.url}/private`);
      expect(route.body).toEqual({ secret: B_SECRET, owner: "B" });
    });
  });

  it("a load-balanced worker that re-registers at B's worker's address does not get B's answers", async () => {
    // Where B's load-balanced worker listens: its process's listening sockets (process workers), or its
    // container's address on its network (Docker workers).
    const addresses = [...victimListeningPorts("private-api").map((port) => `127.0.0.1:${port}`), ...(await victimContainerAddresses())];
    expect(addresses.length).toBeGreaterThan(0);
    const lure = endpoints.lure!;
    await until(async () => (await api(keys.a, "GET", `${lure.url}/private`)).body?.owner === "A");
    for (const address of addresses) {
      await api(keys.a, "POST", `${lure.url}/hijack`, { address: `http://${address}` });
      // Long enough for a re-registered address to be checked (/ping) and used.
      const deadline = Date.now() + 1500;
      while (Date.now() < deadline) {
        // An address that does not speak HTTP may hold a proxied request: bounded, and no leak either way.
        const r = await fetch(`${lure.url}/private`, { headers: { authorization: `Bearer ${keys.a}` }, signal: AbortSignal.timeout(3000) }).then(
          async (res) => ({ text: await res.text() }),
          (err) => ({ text: String(err) }),
        );
        expect(r.text).not.toContain(B_SECRET);
        await new Promise((res) => setTimeout(res, 100));
      }
    }
  }, 180_000);

  describe("volumes belong to their users", () => {
    it("refuses a deploy that names another user's volume by id, naming it", () => {
      const dir = project("tenant-attacker", "thief-by-id");
      writeFileSync(
        join(dir, "src", "probe.ts"),
        `import { readdirSync } from "node:fs";\nimport { Endpoint } from "svc";\nexport const thief = Endpoint({ name: "thief", workers: [0, 1], volume: "${bVolumeId}" })(async function thief(_input: {}) {\n  return readdirSync(process.env.SVC_VOLUME_PATH ?? "/nonexistent");\n});\n`,
      );
      const r = svc(dir, keys.a, ["deploy", "--env", "prod", "--app", "thief-by-id", "--json"]);
      expect(r.status).not.toBe(0);
      expect(r.stderr).toContain("422");
      expect(r.stderr).toContain(bVolumeId);
    }, 180_000);

    it("resolves a plain name among the deploying user's own volumes: A naming \"bvol\" never sees B's files", async () => {
      const dir = project("tenant-attacker", "thief-by-name");
      writeFileSync(
        join(dir, "src", "probe.ts"),
        `import { readdirSync } from "node:fs";\nimport { Endpoint } from "svc";\nexport const thief = Endpoint({ name: "thief", workers: [0, 1], volume: "bvol" })(async function thief(_input: {}) {\n  try { return { files: readdirSync(process.env.SVC_VOLUME_PATH ?? "/nonexistent") }; } catch (err) { return { error: String(err) }; }\n});\n`,
      );
      const r = svc(dir, keys.a, ["deploy", "--env", "prod", "--app", "thief-by-name", "--json"]);
      if (r.status !== 0) {
        // Refused outright is as good: naming the volume it could not find among A's.
        expect(r.stderr).toContain("bvol");
        return;
      }
      const thief = JSON.parse(r.stdout).endpoints.find((e: { name: string }) => e.name === "thief");
      const run = await api(keys.a, "POST", `${thief.url}/runsync`, { input: {} });
      expect(run.body.status, run.text).toBe("COMPLETED");
      expect(JSON.stringify(run.body.output)).not.toContain("b-file.txt");
    }, 180_000);

    it("refuses another user's volume on the REST API", async () => {
      const created = await api(keys.a, "POST", "/v1/endpoints", {
        name: "rest-thief",
        templateId: `svc://${endpoints.probe!.id}`,
        networkVolumeId: bVolumeId,
        computeType: "CPU",
      });
      expect(created.status).toBeGreaterThanOrEqual(400);
      expect(created.status).toBeLessThan(500);
      expect(created.headers.get("content-type")).toContain("problem+json");
    });
  });

  it("configuration cannot smuggle code: a management:write key cannot make workers run code, and loader variables are refused whatever the key", async () => {
    const template = (key: string) =>
      api(key, "POST", "/v1/templates", {
        name: "smuggler",
        imageName: `svc://${endpoints.probe!.id}`,
        env: { NODE_OPTIONS: "--import=data:text/javascript,console.log(process.env)" },
      });
    const writeOnly = await template(keys.aWrite);
    expect(writeOnly.status, writeOnly.text).toBe(403);
    expect(writeOnly.text).toContain("deploy");
    const admin = await template(keys.a);
    expect(admin.status, admin.text).toBe(422);
    expect(admin.text).toContain("NODE_OPTIONS");
    const secret = svc(join(work, "tenant-attacker"), keys.a, ["secret", "set", "LD_PRELOAD", "--json"], "/tmp/evil.so\n");
    expect(secret.status).not.toBe(0);
    expect(secret.stderr).toContain("LD_PRELOAD");
  });

  it("keeps the service's files to itself: data directory 0700, database 0600", () => {
    expect(statSync(dataDir).mode & 0o777).toBe(0o700);
    expect(statSync(join(dataDir, "svc.sqlite")).mode & 0o777).toBe(0o600);
    expect(statSync(join(dataDir, "admin-key"), { throwIfNoEntry: false })?.mode ?? 0o100600).toSatisfy((m: number) => (m & 0o077) === 0);
  });
}

describe("two tenants, process workers", () => tenantSuite("process"));
if (engineUp || /^(1|true|yes)$/i.test(process.env.CI ?? "")) describe("two tenants, Docker workers", () => tenantSuite("docker"));
else describe.skip("two tenants, Docker workers (no Docker engine answers: scripts/ensure-docker.sh)", () => tenantSuite("docker"));
