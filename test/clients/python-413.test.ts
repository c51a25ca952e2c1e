// A client that writes its whole body before reading (Python's http.client, as `requests` does) gets the 413
// problem for a body over the route's limit, not a broken pipe: the service reads and discards the body first.
// Debian's python3 against a real service.

import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect, it } from "vitest";
import { manifest, resource, startTestService, type TestService } from "../service/helpers.js";
import { RUN_BODY_LIMIT } from "../../src/service/api.js";

const PY = String.raw`
import http.client, json, sys
port, path, key, size, chunked = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5] == "chunked"
body = b'{"input": "' + b'x' * size + b'"}'
c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
try:
    headers = {"Authorization": "Bearer " + key, "Content-Type": "application/json"}
    if chunked:
        c.request("POST", path, body=iter([body[i:i + 65536] for i in range(0, len(body), 65536)]), headers=headers, encode_chunked=True)
    else:
        c.request("POST", path, body=body, headers=headers)
    r = c.getresponse()
    print(json.dumps({"status": r.status, "type": r.getheader("content-type"), "body": json.loads(r.read())}))
except Exception as e:
    print(json.dumps({"error": type(e).__name__}))
`;

let t: TestService;
let endpointId: string;
beforeAll(async () => {
  t = await startTestService();
  [{ id: endpointId }] = (await t.service.deploy({ app: "py", env: "test", artifactPath: t.artifact, manifest: manifest({ w: resource() }) })) as Array<{
    id: string;
  }>;
});
afterAll(async () => {
  await t?.close();
});

async function python(size: number, mode: "length" | "chunked") {
  const { stdout } = await promisify(execFile)("python3", ["-c", PY, String(t.service.port), `/v2/${endpointId}/run`, t.key, String(size), mode], {
    maxBuffer: 1 << 20,
  });
  return JSON.parse(stdout) as { status?: number; type?: string; body?: { status: number; detail: string }; error?: string };
}

it.each(["length", "chunked"] as const)(
  "answers 413 problem+json to a body over the limit sent whole before reading (%s)",
  async (mode) => {
    const r = await python(RUN_BODY_LIMIT + 5_000_000, mode);
    expect(r.error).toBeUndefined();
    expect(r.status).toBe(413);
    expect(r.type).toBe("application/problem+json");
    expect(r.body).toMatchObject({ status: 413, detail: `The request body is larger than the limit of ${RUN_BODY_LIMIT} bytes for this route` });
    // And the service still takes an ordinary job.
    expect((await python(10, "length")).status).toBe(200);
  },
  60_000,
);
