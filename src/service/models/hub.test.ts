import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { Hub } from "./hub.js";

const dir = mkdtempSync(join(tmpdir(), "svc-hub-"));
const servers: Server[] = [];
afterAll(async () => {
  for (const s of servers) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
  rmSync(dir, { recursive: true, force: true });
});

async function listen(server: Server): Promise<string> {
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const COMMIT = "c".repeat(40);
const weights = Buffer.alloc(3 * 1024 * 1024, 7);

// As the Hugging Face hub does: a file's resolve route redirects to a CDN on another origin, which must not get
// the hub's token.
describe.each([
  { transport: "node:http", socketGetBytes: Number.POSITIVE_INFINITY },
  { transport: "a socket of its own", socketGetBytes: 0 },
])("a download through $transport", ({ socketGetBytes }) => {
  it("follows the hub's redirect to its CDN, sending the token to the hub only", async () => {
    const seen: Array<{ where: string; headers: IncomingHttpHeaders }> = [];
    const cdn = await listen(
      createServer((req, res) => {
        seen.push({ where: "cdn", headers: req.headers });
        res.writeHead(200, { "content-length": weights.length, "x-repo-commit": COMMIT }).end(weights);
      }),
    );
    const hubUrl = await listen(
      createServer((req, res) => {
        seen.push({ where: "hub", headers: req.headers });
        res.writeHead(302, { location: `${cdn}/blobs/${req.url?.split("/").pop()}` }).end();
      }),
    );
    const hub = new Hub({ url: hubUrl, token: "hf_secret", socketGetBytes });
    const download = await hub.download("org/model", COMMIT, "model.safetensors", 0, weights.length);
    expect(download.resumed).toBe(false);
    const path = join(dir, `redirected-${socketGetBytes}`);
    await download.receive(path, 0, () => true);
    expect(readFileSync(path).equals(weights)).toBe(true);
    expect(seen.map((s) => s.where)).toEqual(["hub", "cdn"]);
    expect(seen[0]!.headers.authorization).toBe("Bearer hf_secret");
    expect(seen[1]!.headers.authorization).toBeUndefined();
  });

  it("refuses a file the hub serves from another commit than the one listed", async () => {
    const hubUrl = await listen(
      createServer((_req, res) => res.writeHead(200, { "content-length": weights.length, "x-repo-commit": "d".repeat(40) }).end(weights)),
    );
    const hub = new Hub({ url: hubUrl, socketGetBytes });
    await expect(hub.download("org/model", COMMIT, "model.safetensors", 0, weights.length)).rejects.toMatchObject({ code: "hub_error" });
  });

  it("says a private model's refusal as unauthorized", async () => {
    const hubUrl = await listen(createServer((_req, res) => res.writeHead(401, { "content-length": 0 }).end()));
    const hub = new Hub({ url: hubUrl, socketGetBytes });
    await expect(hub.download("org/model", COMMIT, "model.safetensors", 0, weights.length)).rejects.toMatchObject({ code: "unauthorized" });
  });
});

it("takes a chunked answer of a large file through node:http", async () => {
  const hubUrl = await listen(
    createServer((_req, res) => {
      res.writeHead(200, { "transfer-encoding": "chunked" });
      res.write(weights.subarray(0, 1000));
      res.end(weights.subarray(1000));
    }),
  );
  const hub = new Hub({ url: hubUrl, socketGetBytes: 0 });
  const download = await hub.download("org/model", COMMIT, "model.safetensors", 0, weights.length);
  const path = join(dir, "chunked");
  await download.receive(path, 0, () => true);
  expect(readFileSync(path).equals(weights)).toBe(true);
});
