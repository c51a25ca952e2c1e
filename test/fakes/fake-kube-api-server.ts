// A fake Kubernetes API server written for the tests: no Kubernetes API server can run on these machines. A real
// HTTP server on 127.0.0.1 that implements, for Pods in namespaces, what the kubernetes driver uses, as the API
// server answers it: create (201; 409 for a name that exists), get, list with an equality label selector, delete
// (with gracePeriodSeconds, recorded; the Pod is gone at once and watchers see DELETED), and watch
// (`?watch=true`: newline-delimited JSON events ADDED / MODIFIED / DELETED, the connection kept open), and a Pod's
// log (`/pods/{name}/log`: plain text, chunked; `follow=true` streams the lines as the fake container writes them
// and ends when the Pod ends or is deleted; `timestamps=true` prefixes RFC3339Nano times; `sinceTime` truncated to
// whole seconds, as the API server hands it to the kubelet; 404 for an unknown Pod, 400 "container ... is waiting
// to start" while it is Pending, 400 for a container the Pod does not have). A Pod that goes Running gets a Pod IP.
// Tests move Pods through their phases (`setPhase`; an init container's failure: `failInit`), play the container's output (`writeLog`), and cut every
// watch (`dropWatches`) or log stream (`dropLogStreams`), hold lists' answers (`holdLists`) and make deletions take
// their time (`holdDeletions`). Secrets too, as the API server keeps them: create (201, `stringData` merged into
// `data` as base64 and dropped; 409 for a name that exists), get, list with an equality label selector, replace
// (PUT: 409 for a stale resourceVersion) and delete (a Status; 404 for an unknown one). Like a cluster without its
// garbage collector, the fake deletes no Secret because its owner went: only deletions remove them.
// PersistentVolumeClaims: create (201; 409 for a name that exists), get, merge-patch (PATCH) and delete. Nodes:
// listed with an equality label selector once a test sets them (`setNodes`); before that the list is 403, as for a
// service whose Role grants no nodes. `created` records every Pod, Secret and claim made, in order.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { KubeConfig, type V1Node, type V1PersistentVolumeClaim, type V1Pod, type V1Secret } from "@kubernetes/client-node";

export interface FakeKubeApiServer {
  url: string;
  kubeConfig(): KubeConfig;
  pods(namespace?: string): V1Pod[];
  /** The Secrets as stored (values in `data`, base64). */
  secrets(namespace?: string): V1Secret[];
  /** Put a Secret in as if made earlier (a leftover), created at `createdAt`. */
  addSecret(secret: V1Secret, opts?: { namespace?: string; createdAt?: Date }): void;
  /** The PersistentVolumeClaims as stored. */
  claims(namespace?: string): V1PersistentVolumeClaim[];
  /** What was created, in order: `pod/<name>`, `secret/<name>`, `pvc/<name>`. */
  created: string[];
  /** The cluster's nodes (listing them is 403 until set). */
  setNodes(nodes: V1Node[]): void;
  /** Every deletion asked for: the Pod and the grace period given. */
  deletions: Array<{ name: string; gracePeriodSeconds: number | undefined }>;
  /** Pod IPs are given when a Pod goes Running (10.244.0.n), unless `podIP` names one; `podIP: null` gives none. */
  setPhase(name: string, phase: "Running" | "Succeeded" | "Failed", opts?: { exitCode?: number; podIP?: string | null; namespace?: string }): void;
  /**
   * The Pod's init container `container` ended with `exitCode` and the termination message the kubelet makes of its
   * last log lines (FallbackToLogsOnError): the Pod fails before its worker container ever ran.
   */
  failInit(name: string, container: string, exitCode: number, message: string, opts?: { namespace?: string }): void;
  /** The Pod stays Pending, its container waiting for `reason` (as the kubelet says of an image it cannot pull). */
  setWaiting(name: string, reason: string, message: string, opts?: { namespace?: string }): void;
  /** What the Pod's container writes to stdout/stderr (the log mixes both, as the kubelet's does): one entry per line. */
  writeLog(name: string, text: string, opts?: { namespace?: string }): void;
  /** How many log requests are open now (follows that have not ended). */
  openLogStreams(): number;
  dropWatches(): void;
  dropLogStreams(): void;
  /** Hold the answers to lists (each a snapshot taken when asked) until the returned function is called. */
  holdLists(): () => void;
  /**
   * Deletions as a kubelet in no hurry makes them: the Pod is marked (deletionTimestamp, a MODIFIED event) and keeps
   * running, its log follows open, until the returned function is called (then it is gone: DELETED).
   */
  holdDeletions(): () => void;
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

/** RFC3339Nano as Go prints it: nanoseconds without trailing zeros. */
function rfc3339Nano(ms: number, nanosInMs: number): string {
  const iso = new Date(ms).toISOString();
  const fraction = `${iso.slice(20, 23)}${String(nanosInMs).padStart(6, "0")}`.replace(/0+$/, "");
  return `${iso.slice(0, 19)}${fraction ? `.${fraction}` : ""}Z`;
}

/** A comparable key of an RFC3339 time: its second, then nanoseconds. */
function timeKey(rfc3339: string): string {
  const m = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?Z$/.exec(rfc3339);
  return m ? `${m[1]}.${(m[2] ?? "").padEnd(9, "0")}` : "";
}

interface LogFollower {
  namespace: string;
  pod: string;
  timestamps: boolean;
  res: ServerResponse;
}

export async function startFakeKubeApiServer(): Promise<FakeKubeApiServer> {
  const store = new Map<string, Map<string, V1Pod>>();
  const watchers = new Set<{ namespace: string; selector: string | null; res: ServerResponse }>();
  const deletions: FakeKubeApiServer["deletions"] = [];
  const logs = new Map<string, Array<{ time: string; text: string }>>();
  const followers = new Set<LogFollower>();
  let heldLists: Array<() => void> | undefined;
  let heldDeletions: Array<{ namespace: string; name: string }> | undefined;
  let version = 1;
  let uid = 0;
  let ips = 0;
  let lastLogMs = 0;
  let nanos = 0;
  const logOf = (namespace: string, pod: string) => logs.get(`${namespace}/${pod}`) ?? logs.set(`${namespace}/${pod}`, []).get(`${namespace}/${pod}`)!;
  const logLine = (entry: { time: string; text: string }, timestamps: boolean) => `${timestamps ? `${entry.time} ` : ""}${entry.text}\n`;
  /** The container ended or the Pod is gone: its follows end, as the kubelet ends them. */
  const endFollows = (namespace: string, pod: string) => {
    for (const f of followers) {
      if (f.namespace !== namespace || f.pod !== pod) continue;
      followers.delete(f);
      f.res.end();
    }
  };
  const podsOf = (ns: string) => store.get(ns) ?? store.set(ns, new Map()).get(ns)!;
  const createdLog: string[] = [];
  const claimStore = new Map<string, Map<string, V1PersistentVolumeClaim>>();
  const claimsOf = (ns: string) => claimStore.get(ns) ?? claimStore.set(ns, new Map()).get(ns)!;
  let nodes: V1Node[] | undefined;
  const secretStore = new Map<string, Map<string, V1Secret>>();
  const secretsOf = (ns: string) => secretStore.get(ns) ?? secretStore.set(ns, new Map()).get(ns)!;
  /** A Secret as the API server stores it: stringData merged into data (base64), which wins over data's key. */
  const stored = (secret: V1Secret, namespace: string, createdAt = new Date()): V1Secret => {
    const data: Record<string, string> = { ...(secret.data ?? {}) };
    for (const [key, value] of Object.entries(secret.stringData ?? {})) data[key] = Buffer.from(value, "utf8").toString("base64");
    const { stringData: _merged, ...rest } = secret;
    return {
      ...rest,
      type: secret.type ?? "Opaque",
      data,
      metadata: {
        ...secret.metadata,
        namespace,
        uid: secret.metadata?.uid ?? `uid-${++uid}`,
        resourceVersion: String(++version),
        creationTimestamp: secret.metadata?.creationTimestamp ?? createdAt,
      },
    };
  };
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
  const status = (res: ServerResponse, code: number, reason: string, message: string) =>
    send(res, code, { kind: "Status", apiVersion: "v1", status: "Failure", reason, message, code });

  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let body = "";
    req.on("data", (d) => (body += d));
    req.on("end", () => {
      const url = new URL(req.url ?? "/", "http://fake");
      const logRoute = /^\/api\/v1\/namespaces\/([^/]+)\/pods\/([^/]+)\/log$/.exec(url.pathname);
      if (logRoute && req.method === "GET") return serveLog(res, url, logRoute[1]!, logRoute[2]!);
      if (url.pathname === "/api/v1/nodes" && req.method === "GET") {
        if (!nodes)
          return status(
            res,
            403,
            "Forbidden",
            'nodes is forbidden: User "system:serviceaccount:default:svc" cannot list resource "nodes" in API group "" at the cluster scope',
          );
        const selector = url.searchParams.get("labelSelector");
        return send(res, 200, {
          kind: "NodeList",
          apiVersion: "v1",
          metadata: { resourceVersion: String(version) },
          items: nodes.filter((n) => matches(n as V1Pod, selector)),
        });
      }
      const claimRoute = /^\/api\/v1\/namespaces\/([^/]+)\/persistentvolumeclaims(?:\/([^/]+))?$/.exec(url.pathname);
      if (claimRoute) return serveClaims(req, res, body, claimRoute[1]!, claimRoute[2]);
      const secretRoute = /^\/api\/v1\/namespaces\/([^/]+)\/secrets(?:\/([^/]+))?$/.exec(url.pathname);
      if (secretRoute) return serveSecrets(req, res, url, body, secretRoute[1]!, secretRoute[2]);
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
        createdLog.push(`pod/${podName}`);
        emit(namespace, "ADDED", created);
        return send(res, 201, created);
      }
      if (req.method === "GET" && !name && url.searchParams.get("watch") === "true") {
        res.writeHead(200, { "content-type": "application/json", "transfer-encoding": "chunked" });
        res.flushHeaders();
        const w = { namespace, selector: url.searchParams.get("labelSelector"), res };
        const from = url.searchParams.get("resourceVersion");
        if (from !== null) {
          for (const e of events)
            if (e.namespace === namespace && e.version > Number(from) && matches(e.pod, w.selector))
              res.write(`${JSON.stringify({ type: e.type, object: e.pod })}\n`);
        }
        watchers.add(w);
        res.on("close", () => watchers.delete(w));
        return undefined;
      }
      if (req.method === "GET" && !name) {
        const selector = url.searchParams.get("labelSelector");
        const list = {
          kind: "PodList",
          apiVersion: "v1",
          metadata: { resourceVersion: String(version) },
          items: [...pods.values()].filter((p) => matches(p, selector)),
        };
        if (heldLists) return void heldLists.push(() => send(res, 200, list));
        return send(res, 200, list);
      }
      const pod = name ? pods.get(name) : undefined;
      if (!pod) return status(res, 404, "NotFound", `pods "${name}" not found`);
      if (req.method === "GET") return send(res, 200, pod);
      if (req.method === "DELETE") {
        const grace = url.searchParams.get("gracePeriodSeconds");
        deletions.push({ name: name!, gracePeriodSeconds: grace === null ? undefined : Number(grace) });
        if (heldDeletions) {
          const marked = {
            ...pod,
            metadata: {
              ...pod.metadata,
              resourceVersion: String(++version),
              deletionTimestamp: new Date(),
              deletionGracePeriodSeconds: grace === null ? 30 : Number(grace),
            },
          };
          pods.set(name!, marked);
          heldDeletions.push({ namespace, name: name! });
          emit(namespace, "MODIFIED", marked);
          return send(res, 200, marked);
        }
        pods.delete(name!);
        endFollows(namespace, name!);
        logs.delete(`${namespace}/${name}`);
        const gone = { ...pod, metadata: { ...pod.metadata, resourceVersion: String(++version), deletionTimestamp: new Date() } };
        emit(namespace, "DELETED", gone);
        return send(res, 200, gone);
      }
      return status(res, 405, "MethodNotAllowed", `${req.method} is not supported by the fake`);
    });
  });
  /** /api/v1/namespaces/{ns}/persistentvolumeclaims[/{name}], as the API server answers it (no binding). */
  function serveClaims(req: IncomingMessage, res: ServerResponse, body: string, namespace: string, name: string | undefined): void {
    const claims = claimsOf(namespace);
    if (req.method === "POST" && !name) {
      const claim = JSON.parse(body) as V1PersistentVolumeClaim;
      const claimName = claim.metadata?.name ?? "";
      if (claims.has(claimName)) return status(res, 409, "AlreadyExists", `persistentvolumeclaims "${claimName}" already exists`);
      const made = {
        ...claim,
        metadata: { ...claim.metadata, namespace, uid: `uid-${++uid}`, resourceVersion: String(++version), creationTimestamp: new Date() },
        status: { phase: "Pending" },
      };
      claims.set(claimName, made);
      createdLog.push(`pvc/${claimName}`);
      return send(res, 201, made);
    }
    const claim = name ? claims.get(name) : undefined;
    if (!claim) return status(res, 404, "NotFound", `persistentvolumeclaims "${name}" not found`);
    if (req.method === "GET") return send(res, 200, claim);
    if (req.method === "PATCH") {
      if (!/merge-patch\+json/.test(req.headers["content-type"] ?? ""))
        return status(res, 415, "UnsupportedMediaType", `the fake takes merge patches, not ${req.headers["content-type"]}`);
      const patch = JSON.parse(body) as V1PersistentVolumeClaim;
      const storage = patch.spec?.resources?.requests?.storage;
      const patched = {
        ...claim,
        metadata: { ...claim.metadata, resourceVersion: String(++version) },
        spec: { ...claim.spec, resources: { ...claim.spec?.resources, requests: { ...claim.spec?.resources?.requests, ...(storage ? { storage } : {}) } } },
      };
      claims.set(name!, patched);
      return send(res, 200, patched);
    }
    if (req.method === "DELETE") {
      claims.delete(name!);
      return send(res, 200, { ...claim, metadata: { ...claim.metadata, deletionTimestamp: new Date() } });
    }
    return status(res, 405, "MethodNotAllowed", `${req.method} is not supported by the fake`);
  }

  /** /api/v1/namespaces/{ns}/secrets[/{name}], as the API server answers it. */
  function serveSecrets(req: IncomingMessage, res: ServerResponse, url: URL, body: string, namespace: string, name: string | undefined): void {
    const secrets = secretsOf(namespace);
    if (req.method === "POST" && !name) {
      const secret = JSON.parse(body) as V1Secret;
      const secretName = secret.metadata?.name;
      if (!secretName) return status(res, 422, "Invalid", "metadata.name is required");
      if (secrets.has(secretName)) return status(res, 409, "AlreadyExists", `secrets "${secretName}" already exists`);
      const created = stored({ ...secret, metadata: { ...secret.metadata, uid: undefined, creationTimestamp: undefined } }, namespace);
      // As the API server validates one: a dockerconfigjson Secret holds `.dockerconfigjson`, a JSON object.
      if (created.type === "kubernetes.io/dockerconfigjson") {
        const config = created.data?.[".dockerconfigjson"];
        const parsed =
          config === undefined
            ? undefined
            : (() => {
                try {
                  return JSON.parse(Buffer.from(config, "base64").toString("utf8")) as unknown;
                } catch {
                  return undefined;
                }
              })();
        if (typeof parsed !== "object" || parsed === null)
          return status(res, 422, "Invalid", `Secret "${secretName}" is invalid: data[.dockerconfigjson]: Required value`);
      }
      secrets.set(secretName, created);
      createdLog.push(`secret/${secretName}`);
      return send(res, 201, created);
    }
    if (req.method === "GET" && !name) {
      const selector = url.searchParams.get("labelSelector");
      const items = [...secrets.values()].filter((x) => matches(x as V1Pod, selector));
      return send(res, 200, { kind: "SecretList", apiVersion: "v1", metadata: { resourceVersion: String(version) }, items });
    }
    const secret = name ? secrets.get(name) : undefined;
    if (!secret) return status(res, 404, "NotFound", `secrets "${name}" not found`);
    if (req.method === "GET") return send(res, 200, secret);
    if (req.method === "PUT") {
      const next = JSON.parse(body) as V1Secret;
      if (next.metadata?.name !== name) return status(res, 400, "BadRequest", "the name of the object does not match the name on the URL");
      const given = next.metadata?.resourceVersion;
      if (given && given !== secret.metadata?.resourceVersion)
        return status(
          res,
          409,
          "Conflict",
          `Operation cannot be fulfilled on secrets "${name}": the object has been modified; please apply your changes to the latest version and try again`,
        );
      const replaced = stored(
        { ...next, metadata: { ...next.metadata, uid: secret.metadata?.uid, creationTimestamp: secret.metadata?.creationTimestamp } },
        namespace,
      );
      secrets.set(name!, replaced);
      return send(res, 200, replaced);
    }
    if (req.method === "DELETE") {
      secrets.delete(name!);
      return send(res, 200, {
        kind: "Status",
        apiVersion: "v1",
        metadata: {},
        status: "Success",
        details: { name, kind: "secrets", uid: secret.metadata?.uid },
      });
    }
    return status(res, 405, "MethodNotAllowed", `${req.method} is not supported by the fake`);
  }

  /** GET .../pods/{name}/log, as the API server answers it (it proxies the kubelet's plain-text log). */
  function serveLog(res: ServerResponse, url: URL, namespace: string, name: string): void {
    const pod = podsOf(namespace).get(name);
    if (!pod) return status(res, 404, "NotFound", `pods "${name}" not found`);
    const containers = (pod.spec?.containers ?? []).map((c) => c.name);
    const container = url.searchParams.get("container") ?? (containers.length === 1 ? containers[0]! : "");
    if (!containers.includes(container)) {
      return status(
        res,
        400,
        "BadRequest",
        container
          ? `container ${container} is not valid for pod ${name}`
          : `a container name must be specified for pod ${name}, choose one of: [${containers.join(" ")}]`,
      );
    }
    if (pod.status?.phase === "Pending")
      return status(res, 400, "BadRequest", `container "${container}" in pod "${name}" is waiting to start: ContainerCreating`);
    const timestamps = url.searchParams.get("timestamps") === "true";
    const since = url.searchParams.get("sinceTime");
    // metav1.Time crosses from the API server to the kubelet as RFC3339 in whole seconds.
    const sinceKey = since ? timeKey(`${new Date(since).toISOString().slice(0, 19)}Z`) : "";
    res.writeHead(200, { "content-type": "text/plain", "transfer-encoding": "chunked" });
    res.flushHeaders();
    for (const entry of logOf(namespace, name)) if (timeKey(entry.time) >= sinceKey) res.write(logLine(entry, timestamps));
    if (url.searchParams.get("follow") !== "true" || pod.status?.phase !== "Running") return void res.end();
    const follower: LogFollower = { namespace, pod: name, timestamps, res };
    followers.add(follower);
    res.on("close", () => followers.delete(follower));
  }

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
    secrets: (namespace = "default") => [...secretsOf(namespace).values()],
    claims: (namespace = "default") => [...claimsOf(namespace).values()],
    created: createdLog,
    setNodes(list) {
      nodes = list;
    },
    addSecret(secret, opts = {}) {
      const namespace = opts.namespace ?? "default";
      secretsOf(namespace).set(secret.metadata!.name!, stored({ ...secret, metadata: { ...secret.metadata, creationTimestamp: opts.createdAt } }, namespace));
    },
    setPhase(name, phase, opts = {}) {
      const namespace = opts.namespace ?? "default";
      const pod = podsOf(namespace).get(name);
      if (!pod) throw new Error(`the fake has no Pod ${name}`);
      const terminated =
        phase === "Running" ? undefined : { exitCode: opts.exitCode ?? (phase === "Succeeded" ? 0 : 1), reason: phase === "Failed" ? "Error" : "Completed" };
      // The Pod's network is set up before its container starts; its IP stays once it ends.
      const podIP = opts.podIP === null ? undefined : (opts.podIP ?? pod.status?.podIP ?? (phase === "Running" ? `10.244.0.${++ips}` : undefined));
      const next: V1Pod = {
        ...pod,
        metadata: { ...pod.metadata, resourceVersion: String(++version) },
        status: {
          phase,
          ...(podIP ? { podIP, podIPs: [{ ip: podIP }] } : {}),
          ...(phase === "Failed" ? { reason: "Error", message: `the worker exited ${terminated!.exitCode}` } : {}),
          containerStatuses: [
            {
              name: "worker",
              image: "",
              imageID: "",
              ready: phase === "Running",
              restartCount: 0,
              state: terminated ? { terminated } : { running: { startedAt: new Date() } },
            },
          ],
        },
      };
      podsOf(namespace).set(name, next);
      if (phase !== "Running") endFollows(namespace, name);
      emit(namespace, "MODIFIED", next);
    },
    failInit(name, container, exitCode, message, opts = {}) {
      const namespace = opts.namespace ?? "default";
      const pod = podsOf(namespace).get(name);
      if (!pod) throw new Error(`the fake has no Pod ${name}`);
      const next: V1Pod = {
        ...pod,
        metadata: { ...pod.metadata, resourceVersion: String(++version) },
        status: {
          phase: "Failed",
          initContainerStatuses: [
            { name: container, image: "", imageID: "", ready: false, restartCount: 0, state: { terminated: { exitCode, reason: "Error", message } } },
          ],
          containerStatuses: [{ name: "worker", image: "", imageID: "", ready: false, restartCount: 0, state: { waiting: { reason: "PodInitializing" } } }],
        },
      };
      podsOf(namespace).set(name, next);
      endFollows(namespace, name);
      emit(namespace, "MODIFIED", next);
    },
    setWaiting(name, reason, message, opts = {}) {
      const namespace = opts.namespace ?? "default";
      const pod = podsOf(namespace).get(name);
      if (!pod) throw new Error(`the fake has no Pod ${name}`);
      const next: V1Pod = {
        ...pod,
        metadata: { ...pod.metadata, resourceVersion: String(++version) },
        status: {
          phase: "Pending",
          containerStatuses: [{ name: "worker", image: "", imageID: "", ready: false, restartCount: 0, state: { waiting: { reason, message } } }],
        },
      };
      podsOf(namespace).set(name, next);
      emit(namespace, "MODIFIED", next);
    },
    writeLog(name, text, opts = {}) {
      const namespace = opts.namespace ?? "default";
      if (!podsOf(namespace).has(name)) throw new Error(`the fake has no Pod ${name}`);
      for (const line of text.replace(/\n$/, "").split("\n")) {
        // Distinct, increasing times, as a container's lines get.
        const now = Date.now();
        nanos = now === lastLogMs ? nanos + 1 : 0;
        lastLogMs = now;
        const entry = { time: rfc3339Nano(now, nanos), text: line };
        logOf(namespace, name).push(entry);
        for (const f of followers) if (f.namespace === namespace && f.pod === name) f.res.write(logLine(entry, f.timestamps));
      }
    },
    openLogStreams: () => followers.size,
    dropLogStreams() {
      for (const f of followers) f.res.destroy();
      followers.clear();
    },
    holdLists() {
      heldLists ??= [];
      return () => {
        const answers = heldLists ?? [];
        heldLists = undefined;
        for (const answer of answers) answer();
      };
    },
    holdDeletions() {
      heldDeletions ??= [];
      return () => {
        const held = heldDeletions ?? [];
        heldDeletions = undefined;
        for (const { namespace, name } of held) {
          const pod = podsOf(namespace).get(name);
          if (!pod) continue;
          podsOf(namespace).delete(name);
          endFollows(namespace, name);
          logs.delete(`${namespace}/${name}`);
          emit(namespace, "DELETED", { ...pod, metadata: { ...pod.metadata, resourceVersion: String(++version) } });
        }
      };
    },
    dropWatches() {
      for (const w of watchers) w.res.destroy();
      watchers.clear();
    },
    close() {
      for (const w of watchers) w.res.destroy();
      for (const f of followers) f.res.destroy();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      // Kept-alive connections too: a driver a test abandoned (a killed service) would otherwise open a new watch
      // or follow on one of them, and the server would wait for it forever.
      server.closeAllConnections();
      return closed;
    },
  };
}
