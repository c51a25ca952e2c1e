// Node model caches on Swarm (docs/models.md, "Node caches"). Swarm has no init containers: before the first worker
// of an endpoint naming models starts, `svc models fetch` runs as a one-shot global job (Docker API 1.41+) on every
// node the worker could land on (its placement constraints), on the host network, with the node's cache directory
// bind-mounted read-write; the driver waits for its tasks to complete, removes the job, and only then creates the
// worker's service, which gets the directory read-only. A failed task fails the worker's start with the fetcher's
// own error line. Which model was fetched on which node is remembered per driver: the job runs again only for a
// model or a node not seen before.
//
// The specs are pure functions; createSwarmModelFetcher does the API calls.

import type Docker from "dockerode";
import { createHash, randomBytes } from "node:crypto";
import { basename, dirname, posix } from "node:path";
import { UserError } from "../errors.js";
import { dockerMessage, dockerStatus, LABELS } from "./docker-engine.js";
import { fetchArgs, fetcherReason, NODE_MODELS_MOUNT, type NodeModelCache } from "./node-models.js";
import { FrameReader } from "./swarm-logs.js";
import type { WorkerLaunch } from "./types.js";

/** The label of a fetch job's service (beside svc's managed and session labels). */
export const MODELS_JOB_LABEL = "svc.models-fetch";
/** Where the job sees the parent of the node's cache directory (so that it can make the directory itself). */
const PARENT_MOUNT = "/svc-models-parent";
const TASK_ENDED = new Set(["complete", "failed", "shutdown", "rejected", "orphaned", "remove"]);
const TASK_FAILED = new Set(["failed", "rejected", "orphaned"]);

/**
 * The fetch job: a global job in the fetcher's image on the host network (a hub on the node's own addresses is
 * reachable as from the node), the cache's parent directory bound read-write (a bind's source must exist: the
 * fetcher makes the cache directory in it), under the worker's constraints, never restarted. The hub's token in
 * its environment: the job lives for the fetch only. Pure.
 */
export function modelsJobSpec(
  launch: Pick<WorkerLaunch, "models" | "modelHub">,
  plan: { cache: NodeModelCache; session: string; constraints: string[]; name: string },
): Docker.CreateServiceOptions {
  const labels = { [LABELS.managed]: "true", [LABELS.session]: plan.session, [MODELS_JOB_LABEL]: "true" };
  return {
    Name: plan.name,
    Labels: labels,
    TaskTemplate: {
      ContainerSpec: {
        Image: plan.cache.image,
        Args: fetchArgs(launch, posix.join(PARENT_MOUNT, basename(plan.cache.path))),
        Env: launch.modelHub?.token ? [`SVC_MODEL_HUB_TOKEN=${launch.modelHub.token}`] : [],
        Labels: labels,
        Mounts: [{ Type: "bind", Source: dirname(plan.cache.path), Target: PARENT_MOUNT }],
        CapabilityDrop: ["ALL"],
        Privileges: { NoNewPrivileges: true },
      },
      RestartPolicy: { Condition: "none", MaxAttempts: 0 },
      ...(plan.constraints.length > 0 ? { Placement: { Constraints: plan.constraints } } : {}),
      Networks: [{ Target: "host" }],
    },
    Mode: { GlobalJob: {} },
  } as Docker.CreateServiceOptions;
}

/** The node's cache as a worker's mount: read-only at /svc-models. Pure. */
export function swarmModelsMount(cache: NodeModelCache) {
  return { Type: "bind" as const, Source: cache.path, Target: NODE_MODELS_MOUNT, ReadOnly: true };
}

type SwarmNode = { ID?: string; Spec?: { Availability?: string; Labels?: Record<string, string> }; Status?: { State?: string } };

/** The nodes a task under these constraints can land on: ready, active, and with the labels they name. Pure. */
export function nodesFor(nodes: readonly SwarmNode[], constraints: readonly string[]): string[] {
  const wanted = constraints.map((c) => /^node\.labels\.(.+?)==(.*)$/.exec(c)).filter((m): m is RegExpExecArray => m !== null);
  return nodes
    .filter((n) => n.ID && n.Spec?.Availability === "active" && n.Status?.State === "ready")
    .filter((n) => wanted.every(([, key, value]) => n.Spec?.Labels?.[key!] === value))
    .map((n) => n.ID!);
}

type JobTask = { NodeID?: string; Status?: { State?: string; Err?: string; ContainerStatus?: { ExitCode?: number } } };

/**
 * Where a fetch job stands from its tasks: running until every node expected has a task and all ended; failed
 * once any task failed; done with the nodes whose task completed. Pure.
 */
export function jobOutcome(
  tasks: readonly JobTask[],
  expected: readonly string[],
): { state: "running" } | { state: "failed"; task: JobTask } | { state: "done"; nodes: string[] } {
  const failed = tasks.find((t) => TASK_FAILED.has(t.Status?.State ?? ""));
  if (failed) return { state: "failed", task: failed };
  const ended = tasks.filter((t) => TASK_ENDED.has(t.Status?.State ?? ""));
  const covered = new Set(tasks.map((t) => t.NodeID));
  if (ended.length < tasks.length || tasks.length === 0 || !expected.every((n) => covered.has(n))) return { state: "running" };
  return { state: "done", nodes: tasks.filter((t) => t.Status?.State === "complete").map((t) => t.NodeID!) };
}

export interface SwarmModelFetcherOptions {
  docker(): Promise<Docker>;
  session: string;
  cache: NodeModelCache;
  /** How long a fetch job may take before the worker's start fails, ms (default one hour: models are large). */
  timeoutMs?: number;
  pollMs?: number;
  log(message: string): void;
}

/** Runs fetch jobs and remembers what each node holds. */
export function createSwarmModelFetcher(options: SwarmModelFetcherOptions) {
  const timeoutMs = options.timeoutMs ?? 3_600_000;
  const pollMs = options.pollMs ?? 500;
  /** Per model: the nodes whose cache holds it (their fetch job's task completed). */
  const fetchedOn = new Map<string, Set<string>>();
  /** Jobs under way, by models and constraints: workers started together wait for one job. */
  const running = new Map<string, Promise<void>>();

  const removeJob = async (d: Docker, id: string) => {
    try {
      await d.getService(id).remove();
    } catch (err) {
      if (dockerStatus(err) !== 404) options.log(`could not remove the model fetch job ${id}: ${dockerMessage(err)}`);
    }
  };

  /** The fetcher's own last error line, from the job's log (through the manager). */
  const reasonOf = async (d: Docker, id: string, task: JobTask): Promise<string> => {
    let text = "";
    try {
      const raw = (await d.getService(id).logs({ stdout: true, stderr: true, tail: 40, follow: false } as never)) as unknown as Buffer;
      text = new FrameReader()
        .push(Buffer.isBuffer(raw) ? raw : Buffer.from(String(raw)))
        .map((f) => f.payload)
        .join("\n");
    } catch (err) {
      options.log(`could not read the log of model fetch job ${id}: ${dockerMessage(err)}`);
    }
    const why = fetcherReason(text)?.replace(/^error: /, "");
    const exit = task.Status?.ContainerStatus?.ExitCode;
    return `${why ?? task.Status?.Err ?? "it failed"}${exit !== undefined && why ? ` (exit code ${exit})` : ""}`;
  };

  const runJob = async (launch: WorkerLaunch, constraints: string[], nodes: string[]) => {
    const d = await options.docker();
    const models = launch.models ?? [];
    const digest = createHash("sha256")
      .update(`${models.join(",")}|${constraints.join(",")}`)
      .digest("hex")
      .slice(0, 10);
    const name = `svc-models-${digest}-${randomBytes(3).toString("hex")}`;
    const spec = modelsJobSpec(launch, { cache: options.cache, session: options.session, constraints, name });
    let created: { id?: string; ID?: string };
    try {
      created = (await d.createService(spec)) as { id?: string; ID?: string };
    } catch (err) {
      throw new UserError(`Swarm refused the model fetch job of endpoint ${launch.endpointName}: ${dockerMessage(err)}`, {
        hint: "Node model caches on Swarm need Docker 20.10 (API 1.41) or later on the manager: they run as a global job.",
        cause: err,
      });
    }
    const id = created.id ?? created.ID!;
    options.log(`fetching models ${models.join(", ")} on ${nodes.length} node(s) for endpoint ${launch.endpointName}: Swarm job ${name}`);
    const deadline = Date.now() + timeoutMs;
    try {
      for (;;) {
        const tasks = (await d.listTasks({ filters: { service: [id] } })) as JobTask[];
        const outcome = jobOutcome(tasks, nodes);
        if (outcome.state === "failed") {
          const node = outcome.task.NodeID ? ` on node ${outcome.task.NodeID}` : "";
          throw new UserError(`the fetch of its models${node} failed: ${await reasonOf(d, id, outcome.task)}`, {
            hint: "See the model's name, the hub (SVC_MODEL_HUB) and its token (SVC_MODEL_HUB_TOKEN); the service tries again after its backoff.",
          });
        }
        if (outcome.state === "done") {
          for (const model of models) {
            const on = fetchedOn.get(model) ?? new Set<string>();
            for (const node of outcome.nodes) on.add(node);
            fetchedOn.set(model, on);
          }
          options.log(`models ${models.join(", ")} are in the node cache of ${outcome.nodes.length} node(s)`);
          return;
        }
        if (Date.now() > deadline)
          throw new UserError(`the fetch of its models did not finish within ${Math.round(timeoutMs / 1000)} s (Swarm job ${name})`, {
            hint: "See `docker service ps` of the job while it runs: a node that cannot pull the fetcher's image (svc images build --server), or a slow hub.",
          });
        await new Promise((resolve) => setTimeout(resolve, pollMs));
      }
    } finally {
      await removeJob(d, id);
    }
  };

  return {
    /** Every node the launch's worker may land on holds its models (fetched now where missing). */
    async ensure(launch: WorkerLaunch, constraints: string[]): Promise<void> {
      const models = launch.models ?? [];
      if (models.length === 0) return;
      const d = await options.docker();
      const nodes = nodesFor((await d.listNodes()) as SwarmNode[], constraints);
      // No node to place it on yet: nothing to fetch now. A worker that lands on a node added later without the
      // cache fails to start (its bind's source is missing there) and the next start fetches on that node.
      if (nodes.length === 0) return;
      if (nodes.every((n) => models.every((m) => fetchedOn.get(m)?.has(n)))) return;
      const key = `${models.join(",")}|${constraints.join(",")}`;
      let job = running.get(key);
      if (!job) {
        job = runJob(launch, constraints, nodes).finally(() => running.delete(key));
        running.set(key, job);
      }
      await job;
    },
  };
}
