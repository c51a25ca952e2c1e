import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { UsageError, errorMessage } from "../errors.js";
import { parseServerConfig, parseServiceSettings, printableConfig, serviceOptionsOf } from "./config.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));

describe("the service's configuration", () => {
  it("takes flags over the environment over defaults, typed, and says where each value came from", () => {
    const parsed = parseServerConfig(
      { port: "9100", workers: "docker" },
      { SVC_SEND_STALL_MS: "5000", SVC_LB_FRONT: "off", SVC_DATA_DIR: "/tmp/d", SVC_GPU_TYPES: "A100, H100" },
    );
    expect(parsed.config).toMatchObject({
      port: 9100,
      workers: "docker",
      host: "127.0.0.1",
      dataDir: "/tmp/d",
      lbFront: false,
      releaseAttempts: 3,
      gpuTypes: ["A100", "H100"],
    });
    expect(parsed.config.clientLimits).toMatchObject({ sendStallMs: 5000, followersPerUser: 10 });
    expect(parsed.sources).toMatchObject({ port: "flag", dataDir: "environment", host: "default", "clientLimits.sendStallMs": "environment" });
    const options = serviceOptionsOf(parsed.config);
    expect(options.lbFront).toBe(false);
    expect(options.dataCenters?.[0]?.gpuTypes).toEqual(["A100", "H100"]);
  });

  it("reads the host-loopback ports sandboxed workers may reach as numbers, and refuses what is not a port", () => {
    expect(parseServerConfig({}, { SVC_WORKER_HOST_PORTS: "4318, 9090" }).config.workerHostPorts).toEqual([4318, 9090]);
    expect(() => parseServerConfig({}, { SVC_WORKER_HOST_PORTS: "4318,http" })).toThrow(/SVC_WORKER_HOST_PORTS.*not a port \(1-65535\): http/);
    expect(() => parseServerConfig({}, { SVC_WORKER_HOST_PORTS: "70000" })).toThrow(/not a port/);
  });

  it("takes how container workers are confined: the Docker runtime (flag or variable), the RuntimeClass, process and /tmp limits", () => {
    const defaults = parseServerConfig({}, {}).config;
    expect(defaults).toMatchObject({ workerPidsLimit: 1024, workerTmpMb: 1024 });
    expect(defaults.dockerRuntime).toBeUndefined();
    expect(defaults.k8sRuntimeClass).toBeUndefined();
    const parsed = parseServerConfig(
      { dockerRuntime: "runsc" },
      { SVC_DOCKER_RUNTIME: "runc", SVC_K8S_RUNTIME_CLASS: "gvisor", SVC_WORKER_PIDS_LIMIT: "256", SVC_WORKER_TMP_MB: "512" },
    );
    expect(parsed.config).toMatchObject({ dockerRuntime: "runsc", k8sRuntimeClass: "gvisor", workerPidsLimit: 256, workerTmpMb: 512 });
    expect(parsed.sources).toMatchObject({ dockerRuntime: "flag", workerTmpMb: "environment" });
    expect(parseServerConfig({}, { SVC_DOCKER_RUNTIME: "runsc" }).config.dockerRuntime).toBe("runsc");
    expect(() => parseServerConfig({}, { SVC_WORKER_PIDS_LIMIT: "none" })).toThrow('SVC_WORKER_PIDS_LIMIT must be a positive whole number, not "none"');
  });

  it("takes how network volumes reach cluster nodes: a Swarm volume driver and its options, a Kubernetes StorageClass", () => {
    const defaults = parseServerConfig({}, {}).config;
    expect([defaults.swarmVolumeDriver, defaults.swarmVolumeOptions, defaults.k8sStorageClass]).toEqual([undefined, undefined, undefined]);
    const parsed = parseServerConfig(
      {},
      { SVC_SWARM_VOLUME_DRIVER: "local", SVC_SWARM_VOLUME_OPTIONS: "type=nfs,o=addr=10.0.0.5,rw,device=:/exports/{volume}", SVC_K8S_STORAGE_CLASS: "nfs-rwx" },
    );
    expect(parsed.config).toMatchObject({
      swarmVolumeDriver: "local",
      swarmVolumeOptions: { type: "nfs", o: "addr=10.0.0.5,rw", device: ":/exports/{volume}" },
      k8sStorageClass: "nfs-rwx",
    });
    expect(() => parseServerConfig({}, { SVC_SWARM_VOLUME_OPTIONS: "device=/exports/{name}" })).toThrow(/SVC_SWARM_VOLUME_OPTIONS holds \{name\}/);
  });

  it("takes where webhooks may go besides public addresses (flag or variable, svc dev too), refusing what is no address, range or name", () => {
    expect(parseServerConfig({}, {}).config.webhookAllow).toBeUndefined();
    expect(serviceOptionsOf(parseServerConfig({}, {}).config).webhooks).toBeUndefined();
    const parsed = parseServerConfig({ webhookAllow: "10.0.0.0/8, hooks.internal,*.corp.example" }, { SVC_WEBHOOK_ALLOW: "192.168.0.0/16" });
    expect(parsed.config.webhookAllow).toEqual(["10.0.0.0/8", "hooks.internal", "*.corp.example"]);
    expect(parsed.sources.webhookAllow).toBe("flag");
    expect(serviceOptionsOf(parsed.config).webhooks).toEqual({ allow: ["10.0.0.0/8", "hooks.internal", "*.corp.example"] });
    expect(parseServiceSettings({ SVC_WEBHOOK_ALLOW: "fd00::/8" }).webhookAllow).toEqual(["fd00::/8"]);
    expect(() => parseServerConfig({}, { SVC_WEBHOOK_ALLOW: "10.0.0.0/33,bad host" })).toThrow(
      'SVC_WEBHOOK_ALLOW: "10.0.0.0/33" has no valid prefix length (0-32); "bad host" is not an address, an address range or a host name',
    );
  });

  it("takes the queue quotas, per user and per endpoint, with per-user overrides; defaults where unset", () => {
    expect(serviceOptionsOf(parseServiceSettings({})).queueQuotas).toEqual({
      user: { jobs: 20_000, bytes: 1024 ** 3 },
      endpoint: { jobs: 10_000, bytes: 1024 ** 3 / 2 },
    });
    const settings = parseServiceSettings({
      SVC_QUEUE_QUOTA_USER_JOBS: "20",
      SVC_QUEUE_QUOTA_ENDPOINT_BYTES: "1000",
      SVC_QUEUE_QUOTA_USERS: "ci=jobs:500/bytes:2000",
    });
    expect(serviceOptionsOf(settings).queueQuotas).toEqual({
      user: { jobs: 20, bytes: 1024 ** 3 },
      endpoint: { jobs: 10_000, bytes: 1000 },
      users: { ci: { jobs: 500, bytes: 2000 } },
    });
    expect(() => parseServiceSettings({ SVC_QUEUE_QUOTA_USERS: "ci=jobs:lots", SVC_QUEUE_QUOTA_USER_BYTES: "0" })).toThrow(
      /SVC_QUEUE_QUOTA_USER_BYTES must be a positive[\s\S]*SVC_QUEUE_QUOTA_USERS: "jobs:lots"/,
    );
  });

  it("refuses every bad value at once, naming each", () => {
    let error: unknown;
    try {
      parseServerConfig({ port: "70000" }, { SVC_RELEASE_ATTEMPTS: "0", SVC_LB_FRONT: "maybe" });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(UsageError);
    const message = errorMessage(error);
    expect(message).toContain('--port must be 0..65535, not "70000"');
    expect(message).toContain('SVC_RELEASE_ATTEMPTS must be a positive whole number, not "0"');
    expect(message).toContain('SVC_LB_FRONT must be "on" or "off", not "maybe"');
  });

  it("leaves the server's own settings out of what svc dev reads, and never prints a secret", () => {
    const settings = parseServiceSettings({ SVC_UPLOAD_IDLE_MS: "1234", SVC_DATA_DIR: "/ignored" });
    expect(settings.uploadIdleMs).toBe(1234);
    expect((settings as unknown as Record<string, unknown>).dataDir).toBeUndefined();
    const rows = printableConfig(parseServerConfig({}, { SVC_API_KEY: "svc_very_secret", SVC_SECRETS_KEY: "k".repeat(44), SVC_SECRETS_KEY_PREVIOUS: "old" }));
    expect(JSON.stringify(rows)).not.toMatch(/svc_very_secret|kkkk|old/);
    expect(rows.find((r) => r.setting === "apiKey")).toMatchObject({ value: "(set, not shown)", source: "environment" });
  });

  it("svc server --print-config prints it and exits; a bad value is exit 2 before anything starts", () => {
    const env = { ...process.env, SVC_SEND_STALL_MS: "4000", SVC_API_KEY: "svc_secret_key" };
    const ok = spawnSync(process.execPath, [join(repo, "bin", "svc.js"), "server", "--print-config", "--json", "--port", "0"], { env, encoding: "utf8" });
    expect(ok.status, ok.stderr).toBe(0);
    const rows = JSON.parse(ok.stdout).settings as Array<{ setting: string; value: unknown; source: string }>;
    expect(rows.find((r) => r.setting === "clientLimits.sendStallMs")).toMatchObject({ value: 4000, source: "environment" });
    expect(ok.stdout).not.toContain("svc_secret_key");
    const bad = spawnSync(process.execPath, [join(repo, "bin", "svc.js"), "server", "--port", "0"], {
      env: { ...env, SVC_MAX_FOLLOWERS: "lots" },
      encoding: "utf8",
    });
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain('SVC_MAX_FOLLOWERS must be a positive whole number, not "lots"');
  });

  it("takes a PostgreSQL store URL, never shows its password, and refuses anything else naming the flag", () => {
    const parsed = parseServerConfig({ store: "postgres://svc:hunter2@db.internal:5432/svc" }, {});
    expect(parsed.config.store).toBe("postgres://svc:hunter2@db.internal:5432/svc");
    const shown = printableConfig(parsed).find((r) => r.setting === "store");
    expect(shown).toMatchObject({ value: "postgres://svc:***@db.internal:5432/svc", source: "flag" });
    expect(JSON.stringify(printableConfig(parsed))).not.toContain("hunter2");
    expect(parseServerConfig({}, { SVC_STORE_URL: "postgresql://h/db" }).config.store).toBe("postgresql://h/db");
    expect(() => parseServerConfig({ store: "mysql://h/db" }, {})).toThrow('--store must be a postgres:// URL, not "mysql://h/db"');
  });

  it("svc server with a database that does not answer fails at start, naming it (without its password) and what to check", () => {
    const env = { ...process.env, SVC_API_KEY: "svc_secret_key" };
    const dataDir = join(repo, "node_modules", ".cache", `svc-store-test-${process.pid}`);
    const r = spawnSync(
      process.execPath,
      [join(repo, "bin", "svc.js"), "server", "--port", "0", "--data-dir", dataDir, "--store", "postgres://svc:hunter2@127.0.0.1:1/svc"],
      { env, encoding: "utf8", timeout: 30_000 },
    );
    expect(r.status).toBe(1);
    expect(r.stderr).toContain("The service cannot open its database postgres://svc:***@127.0.0.1:1/svc");
    expect(r.stderr).toContain("Check that PostgreSQL runs and answers at that address");
    expect(r.stderr).not.toContain("hunter2");
  });
});
