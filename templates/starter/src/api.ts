// A load-balanced endpoint: plain HTTP routes served directly by the workers (no queue, no retries).
import { Endpoint } from "svc";

export const api = Endpoint({ name: "api", cpu: "cpu3c-1-2", workers: [1, 3] });

api.post("/process", async (body: { items?: unknown[] }) => ({ ok: true, count: body?.items?.length ?? 0 }));
api.get("/status", async () => ({ up: true }));
