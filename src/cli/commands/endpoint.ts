// `svc endpoint create|list|get|update|delete`: endpoints made through the REST API ({rest_url}/v1/endpoints),
// outside any app. App endpoints are managed with `svc deploy`. `svc endpoint webhook ...` (endpoint-webhook.ts)
// manages the webhook settings of any endpoint, app endpoints included.
import type { Command } from "commander";
import { UsageError } from "../../errors.js";
import { confirmDestructive } from "../confirm.js";
import { changes, defined, envFlag, fields, intFlag, listFlag, management, table } from "../management.js";
import { createOutput } from "../output.js";
import { durationFlag } from "../duration.js";
import { SCALER_TYPES } from "svc/internal";
import { registerWebhook } from "./endpoint-webhook.js";

type EndpointRecord = Record<string, unknown> & {
  id: string;
  name: string;
  status: string;
  statusReason: string | null;
  url: string;
  ping?: { ok: boolean; message: string };
  crashLoop?: { deaths: number };
};
const path = (id?: string) => `/v1/endpoints${id ? `/${encodeURIComponent(id)}` : ""}`;

interface SettingFlags {
  name?: string;
  template?: string;
  compute?: string;
  gpu?: string[];
  gpuCount?: number;
  workersMin?: number;
  workersMax?: number;
  idleTimeout?: number;
  env?: Record<string, string>;
  volume?: string;
  executionTimeout?: number;
  scalerType?: string;
  scalerValue?: number;
  json?: boolean;
}

function withSettingFlags(command: Command): Command {
  return command
    .option("--name <name>", "endpoint name")
    .option("--template <id>", "template id")
    .option("--compute <type>", "GPU or CPU")
    .option("--gpu <types>", "GPU types in priority order, comma separated (repeatable)", listFlag)
    .option("--gpu-count <n>", "GPUs per worker", intFlag("--gpu-count"))
    .option("--workers-min <n>", "minimum workers", intFlag("--workers-min"))
    .option("--workers-max <n>", "maximum workers", intFlag("--workers-max"))
    .option("--idle-timeout <duration>", "how long an idle worker is kept (90s, 5m; a bare number is seconds)", durationFlag("--idle-timeout", "s"))
    .option("--env <KEY=VALUE>", "environment variable (repeatable)", envFlag)
    .option("--volume <id>", "network volume id to mount")
    .option("--execution-timeout <duration>", "job execution timeout (10m, 1h; a bare number is ms)", durationFlag("--execution-timeout", "ms"))
    .option(
      "--scaler-type <type>",
      "when workers are added: QUEUE_DELAY (a job waited --scaler-value seconds) or REQUEST_COUNT (one worker per --scaler-value jobs)",
    )
    .option("--scaler-value <n>", "QUEUE_DELAY: seconds a job may wait; REQUEST_COUNT: jobs per worker (1-3600)", intFlag("--scaler-value"))
    .option("--json", "print JSON");
}

function body(o: SettingFlags): Record<string, unknown> {
  const compute = o.compute?.toUpperCase();
  if (compute !== undefined && compute !== "GPU" && compute !== "CPU") throw new UsageError(`--compute must be GPU or CPU, not "${o.compute}"`);
  const scalerType = o.scalerType?.toUpperCase().replace(/-/g, "_");
  if (scalerType !== undefined && !(SCALER_TYPES as readonly string[]).includes(scalerType)) {
    throw new UsageError(`--scaler-type must be ${SCALER_TYPES.join(" or ")}, not "${o.scalerType}"`);
  }
  return defined({
    name: o.name,
    templateId: o.template,
    computeType: compute,
    gpuTypeIds: o.gpu,
    gpuCount: o.gpuCount,
    workersMin: o.workersMin,
    workersMax: o.workersMax,
    idleTimeout: o.idleTimeout,
    env: o.env,
    networkVolumeId: o.volume,
    executionTimeoutMs: o.executionTimeout,
    scalerType,
    scalerValue: o.scalerValue,
  });
}

const human = (e: EndpointRecord) => fields(e);

/** After a create or update: why it cannot run, and what a prebuilt image's /ping check found (stderr). */
function reportStatus(out: ReturnType<typeof createOutput>, e: EndpointRecord): void {
  if (e.status === "WAITING") out.warn(`endpoint ${e.name} is waiting: ${e.statusReason}`);
  else if (e.crashLoop) out.warn(`endpoint ${e.name}: ${e.statusReason}`);
  else if (e.ping) out.info(`endpoint ${e.name}: ${e.ping.message}`);
}

export function register(program: Command): void {
  const endpoint = program.command("endpoint").description("Manage endpoints created from templates (REST API)");
  withSettingFlags(endpoint.command("create").description("Create an endpoint from a template"))
    .option("--type <type>", "queue (svc code, the default) or lb (a load-balanced endpoint running the template's prebuilt image)")
    .action(async (o: SettingFlags & { type?: string }) => {
      if (!o.name || !o.template) throw new UsageError("svc endpoint create needs --name and --template");
      if (o.type !== undefined && o.type !== "queue" && o.type !== "lb") throw new UsageError(`--type must be queue or lb, not "${o.type}"`);
      const e = await management<EndpointRecord>("POST", path(), defined({ ...body(o), type: o.type }));
      const out = createOutput({ json: o.json });
      reportStatus(out, e);
      out.result(e, () => human(e));
    });
  endpoint
    .command("list")
    .description("List your REST-created endpoints")
    .option("--json", "print JSON")
    .action(async (o: { json?: boolean }) => {
      const list = await management<EndpointRecord[]>("GET", path());
      createOutput({ json: o.json }).result(list, () =>
        table(list, ["id", "name", "status", "computeType", "allocatedGpuType", "workersMin", "workersMax", "scalerType", "scalerValue", "url"]),
      );
    });
  endpoint
    .command("get")
    .description("Show one endpoint")
    .argument("<id>", "endpoint id")
    .option("--json", "print JSON")
    .action(async (id: string, o: { json?: boolean }) => {
      const e = await management<EndpointRecord>("GET", path(id));
      createOutput({ json: o.json }).result(e, () => human(e));
    });
  withSettingFlags(
    endpoint.command("update").description("Change an endpoint (GPU types or worker counts restart its workers)").argument("<id>", "endpoint id"),
  ).action(async (id: string, o: SettingFlags) => {
    const e = await management<EndpointRecord>("PATCH", path(id), changes(body(o), "svc endpoint update"));
    const out = createOutput({ json: o.json });
    reportStatus(out, e);
    out.result(e, () => human(e));
  });
  registerWebhook(endpoint);
  endpoint
    .command("delete")
    .description("Delete an endpoint with its configuration, logs and job history")
    .argument("<id>", "endpoint id")
    .option("--yes", "do not ask for confirmation (required without a terminal)")
    .option("--json", "print JSON")
    .action(async (id: string, o: { yes?: boolean; json?: boolean }) => {
      const out = createOutput({ json: o.json });
      // Fetched first: the question names what goes, and a wrong id fails before anything is asked.
      const e = await management<EndpointRecord>("GET", path(id));
      await confirmDestructive(out, o.yes, `deletes endpoint "${e.name}" (${id}) with its configuration, logs and job history`);
      await management("DELETE", path(id));
      out.result({ id, deleted: true }, () => `deleted endpoint ${id}`);
    });
}
