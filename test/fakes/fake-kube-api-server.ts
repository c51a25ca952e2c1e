// A fake Kubernetes API server written for the tests: no Kubernetes API server can run on these machines. A real
// HTTP server on 127.0.0.1 that implements, for Pods in namespaces, what the kubernetes driver uses, as the API
// server answers it: create (201; 409 for a name that exists), get, list with an equality label selector, delete
// (with gracePeriodSeconds, recorded; the Pod is gone at once and watchers see DELETED), and watch
// (`?watch=true`: newline-delimited JSON events ADDED / MODIFIED / DELETED, the connection kept open). Tests move
// Pods through their phases (`setPhase`) and cut every watch (`dropWatches`).

import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { KubeConfig, type V1Pod } from "@kubernetes/client-node";

export interface FakeKubeApiServer {
  url: string;
  kubeConfig(): KubeConfig;
  pods(namespace?: string): V1Pod[];
  /** Every deletion asked for: the Pod and the grace period given. */
  deletions: Array<{ name: string; gracePeriodSeconds: number | undefined }>;
  setPhase(name: string, phase: "Running" | "Succeeded" | "Failed", opts?: { exitCode?: number; podIP?: string; namespace?: string }): void;
  dropWatches(): void;
  close(): Promise<void>;
}

function matches(pod: V1Pod, selector: string | null): boolean {
  if (!selector) return true;
  const labels = pod.metadata?.labels ?? {};
  return selector.split(",").every((term) => {
    const [key, value] = term.split("=") as [string, string];
    return labels[key] === value;
  });
}

export async function startFakeKubeApiServer(): Promise<FakeKubeApiServer> {
  const store = new Map<string, Map<string, V1Pod>>();
  const watchers = new Set<{ namespace: string; selector: string | null; res: ServerResponse }>();
  const deletions: FakeKubeApiServer["deletions"] = [];
  let version = 1;
  let uid = 0;
  const podsOf = (ns: string) => store.get(ns) ?? store.set(ns, new Map()).get(ns)!;
  /** Every event, so that a watch from a resourceVersion first gets what happened since, as the API server does. */
  const events: Array<{ version: number; namespace: string; type: string; pod: V1Pod }> = [];
  const emit = (namespace: string, type: "ADDED" | "MODIFIED" | "DELETED", pod: V1Pod) => {
    events.push({ version: Number(pod.metadata?.resourceVersion), namespace, type, pod });
    for (const w of watchers) if (w.namespace === namespace && matches(pod, w.selector)) w.res.write(`${JSON.stringify({ type, object: pod })}\n`);
  };
  const send = (res: ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { "content-type": "application/json" });
    res.end(JSON.stringify(body));
  };
  const status = (res: ServerResponse, code: number, reason: string, message: string) => send(res, code, { kind: "Status", apiVersion: "v1", status: "Failure", reason, message, code });

  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let body = "";
    req.on("data", (d) => (body += d));
    req.on("end", () => {
      const url = new URL(req.url ?? "/", "http://fake");
      const m = /^\/api\/v1\/namespaces\/([^/]+)\/pods(?:\/([^/]+))?$/.exec(url.pathname);
      if (!m) return status(res, 404, "NotFound", `the fake serves Pods only, not ${url.pathname}`);
      const [, namespace, name] = m as unknown as [string, string, string | undefined];
      const pods = podsOf(namespace);
      if (req.method === "POST" && !name) {
        const pod = JSON.parse(body) as V1Pod;
        const podName = pod.metadata?.name;
        if (!podName) return status(res, 422, "Invalid", "metadata.name is required");
        if (pods.has(podName)) return status(res, 409, "AlreadyExists", `pods "${podName}" already exists`);
        const created: V1Pod = {
          ...pod,
          metadata: { ...pod.metadata, namespace, uid: `uid-${++uid}`, resourceVersion: String(++version), creationTimestamp: new Date() },
          status: { phase: "Pending" },
        };
        pods.set(podName, created);
        emit(namespace, "ADDED", created);
        return send(res, 201, created);
      }
      if (req.method === "GET" && !name && url.searchParams.get("watch") === "true") {
        res.writeHead(200, { "content-type": "application/json", "transfer-encoding": "chunked" });
        res.flushHeaders();
        const w = { namespace, selector: url.searchParams.get("labelSelector"), res };
        const from = url.searchParams.get("resourceVersion");
        if (from !== null) {
          for (const e of events) if (e.namespace === namespace && e.version > Number(from) && matches(e.pod, w.selector)) res.write(`${JSON.stringify({ type: e.type, object: e.pod })}\n`);
        }
        watchers.add(w);
        res.on("close", () => watchers.delete(w));
        return undefined;
      }
      if (req.method === "GET" && !name) {
        const selector = url.searchParams.get("labelSelector");
        return send(res, 200, { kind: "PodList", apiVersion: "v1", metadata: { resourceVersion: String(version) }, items: [...pods.values()].filter((p) => matches(p, selector)) });
      }
      const pod = name ? pods.get(name) : undefined;
      if (!pod) return status(res, 404, "NotFound", `pods "${name}" not found`);
      if (req.method === "GET") return send(res, 200, pod);
      if (req.method === "DELETE") {
        const grace = url.searchParams.get("gracePeriodSeconds");
        deletions.push({ name: name!, gracePeriodSeconds: grace === null ? undefined : Number(grace) });
        pods.delete(name!);
        const gone = { ...pod, metadata: { ...pod.metadata, resourceVersion: String(++version), deletionTimestamp: new Date() } };
        emit(namespace, "DELETED", gone);
        return send(res, 200, gone);
      }
      return status(res, 405, "MethodNotAllowed", `${req.method} is not supported by the fake`);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  return {
    url,
    deletions,
    kubeConfig() {
      const kc = new KubeConfig();
      kc.loadFromOptions({
        clusters: [{ name: "fake", server: url, skipTLSVerify: true }],
        users: [{ name: "tester", token: "fake-token" }],
        contexts: [{ name: "fake", cluster: "fake", user: "tester" }],
        currentContext: "fake",
      });
      return kc;
    },
    pods: (namespace = "default") => [...podsOf(namespace).values()],
    setPhase(name, phase, opts = {}) {
      const namespace = opts.namespace ?? "default";
      const pod = podsOf(namespace).get(name);
      if (!pod) throw new Error(`the fake has no Pod ${name}`);
      const terminated = phase === "Running" ? undefined : { exitCode: opts.exitCode ?? (phase === "Succeeded" ? 0 : 1), reason: phase === "Failed" ? "Error" : "Completed" };
      const next: V1Pod = {
        ...pod,
        metadata: { ...pod.metadata, resourceVersion: String(++version) },
        status: {
          phase,
          ...(opts.podIP ? { podIP: opts.podIP } : {}),
          ...(phase === "Failed" ? { reason: "Error", message: `the worker exited ${terminated!.exitCode}` } : {}),
          containerStatuses: [{ name: "worker", image: "", imageID: "", ready: phase === "Running", restartCount: 0, state: terminated ? { terminated } : { running: { startedAt: new Date() } } }],
        },
      };
      podsOf(namespace).set(name, next);
      emit(namespace, "MODIFIED", next);
    },
    dropWatches() {
      for (const w of watchers) w.res.destroy();
      watchers.clear();
    },
    close() {
      for (const w of watchers) w.res.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
