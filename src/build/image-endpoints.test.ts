// Image endpoints in an app, `Endpoint({ name, image })`: the configuration's rules, what discovery finds (and
// refuses: an image with a handler, neither), and what the manifest says of them (the image, its settings, no
// handler). The fixture mixes a TypeScript endpoint and an image endpoint (fixtures/image-app).

import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { configProblems, endpointImageOf, normalizeConfig } from "svc/internal";
import { UserError } from "../errors.js";
import { imageProblemsInResources } from "../service/deploy/resource-rules.js";
import { discover } from "./discover.js";
import { buildManifest } from "./manifest.js";

const fixture = fileURLToPath(new URL("../../fixtures/image-app", import.meta.url));
const dirs: string[] = [];
afterAll(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

async function project(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), "svc-image-endpoints-"));
  dirs.push(dir);
  await writeFile(path.join(dir, "package.json"), JSON.stringify({ name: "p", type: "module" }));
  for (const [name, text] of Object.entries(files)) await writeFile(path.join(dir, name), text);
  return dir;
}

async function problemsOf(root: string): Promise<string[]> {
  try {
    await discover(root);
  } catch (err) {
    expect(err).toBeInstanceOf(UserError);
    return (err as UserError).problems;
  }
  throw new Error("discovery did not fail");
}

describe("image endpoint configuration", () => {
  it("accepts an image with the settings that apply to a container", () => {
    expect(
      configProblems({
        name: "llm",
        image: "my/worker-vllm:1.2",
        gpu: "HOPPER_141",
        gpuCount: 2,
        workers: [0, 2],
        idleTimeout: 30,
        executionTimeout: 900,
        env: { MODEL: "m" },
        volume: "models",
        shmSizeMb: 2048,
        containerDiskInGb: 40,
      }),
    ).toEqual([]);
  });

  it("refuses what does not apply to an image, and container sizes without one", () => {
    expect(configProblems({ name: "x", image: "my/worker:1", dependencies: ["sharp"], snapshot: true })).toEqual([
      '"dependencies" does not apply to an image endpoint: "image" runs a container image, not this app\'s code',
      '"snapshot" does not apply to an image endpoint: "image" runs a container image, not this app\'s code',
    ]);
    expect(configProblems({ name: "x", shmSizeMb: 1024 })).toEqual(['"shmSizeMb" needs "image": it sizes an image endpoint\'s container']);
    expect(configProblems({ name: "x", image: "svc://abc" })[0]).toMatch(/names svc code/);
    expect(configProblems({ name: "x", image: "has space:1" })[0]).toMatch(/is not a container image reference/);
    expect(configProblems({ name: "x", image: "w:1", shmSizeMb: 8 })).toEqual(['"shmSizeMb" must be an integer from 64 to 262144']);
  });
});

describe("discovery and the manifest of fixtures/image-app", async () => {
  const result = await discover(fixture);

  it("finds the image endpoint beside the TypeScript one: a queue endpoint with no function", () => {
    expect(result.endpoints.map((e) => [e.name, e.type, e.config.image ?? null, e.functions.map((f) => f.name)])).toEqual([
      ["echo-image", "queue", "svc-test-provider-worker:image-app", []],
      ["greeter", "queue", null, ["greet"]],
    ]);
  });

  it("writes the image as the resource's imageName with its settings and no handler", () => {
    const manifest = buildManifest({ app: "image-app", fingerprint: "f", endpoints: result.endpoints, dependencies: {}, excluded: [], svcVersion: "9.9.9" });
    const image = manifest.resources["echo-image"]!;
    expect(image).toMatchObject({
      is_load_balanced: false,
      imageName: "svc-test-provider-worker:image-app",
      workersMin: 0,
      workersMax: 1,
      idleTimeout: 60,
      env: { GREETING: "hi" },
      functions: [],
      computeType: "CPU",
      protocol: "provider",
      shmSizeMb: 128,
      containerDiskInGb: 5,
      handler: "",
    });
    expect(endpointImageOf(image)).toBe("svc-test-provider-worker:image-app");
    const code = manifest.resources.greeter!;
    expect([code.imageName, code.handler, code.protocol, endpointImageOf(code)]).toEqual([
      "svc-worker-cpu:9.9.9",
      "endpoints/greeter/handler.mjs",
      undefined,
      undefined,
    ]);
    // What the service checks of a manifest it is given passes what the build writes.
    expect(imageProblemsInResources(manifest.resources)).toEqual([]);
  });

  it("keeps a GPU image endpoint's GPU settings", () => {
    const config = normalizeConfig({ name: "llm", image: "my/worker-vllm:1.2", gpu: "HOPPER_141", gpuCount: 2 });
    const manifest = buildManifest({
      app: "a",
      fingerprint: "f",
      endpoints: [{ name: "llm", type: "queue", config, functions: [], routes: [] }],
      dependencies: {},
      excluded: [],
    });
    expect(manifest.resources.llm).toMatchObject({
      imageName: "my/worker-vllm:1.2",
      computeType: "GPU",
      gpuIds: "HOPPER_141",
      gpuCount: 2,
      protocol: "provider",
    });
  });
});

describe("discovery refuses", () => {
  it("an image endpoint given a function: image and a handler are mutually exclusive", async () => {
    const root = await project({
      "app.ts": `import { Endpoint } from "svc";\nexport const f = Endpoint({ name: "both", image: "my/worker:1" })(async function f() { return 1; });\n`,
    });
    const problems = await problemsOf(root);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(
      /^app\.ts:2: endpoint "both" names an image \("my\/worker:1"\) and is also given a function or class here: an image endpoint's container runs its jobs, so it takes no handler\. Fix: /,
    );
  });

  it("an image endpoint given a route", async () => {
    const root = await project({
      "app.ts": `import { Endpoint } from "svc";\nexport const api = Endpoint({ name: "api", image: "my/worker:1" });\napi.get("/x", async () => 1);\n`,
    });
    expect((await problemsOf(root))[0]).toMatch(/^app\.ts:3: endpoint "api" names an image \("my\/worker:1"\) and is also given a route here/);
  });

  it("an endpoint with neither a handler nor an image, saying both ways", async () => {
    const root = await project({
      "app.ts": `import { Endpoint } from "svc";\nexport const ok = Endpoint({ name: "ok" })(async () => 1);\nexport const none = Endpoint({ name: "none" });\n`,
    });
    const problems = await problemsOf(root);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(
      /^app\.ts:3: Endpoint\(\{ name: "none" \}\) is never applied to a function or class, has no routes and names no image\. Fix: .*image: "my\/worker:1\.0"/,
    );
  });

  it("a manifest whose image endpoint is not what the build writes", () => {
    expect(
      imageProblemsInResources({
        a: { protocol: "provider", imageName: "svc://x", handler: "", is_load_balanced: false },
        b: { protocol: "other" },
        c: { shmSizeMb: 128, imageName: "svc-worker-cpu:1" },
      } as never),
    ).toEqual([
      'endpoint "a": "imageName" names svc code ("svc://x"); an image endpoint runs a container image such as "my/worker:1.2"',
      'endpoint "b": "protocol" must be "provider" (an image endpoint\'s workers speak the provider\'s protocol)',
      'endpoint "c": "shmSizeMb" is for image endpoints only',
    ]);
  });
});
