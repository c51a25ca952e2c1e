// Calling an endpoint function from outside its worker: through the job API of the endpoint in context.

import { resolveEndpoint } from "./context.js";
import { FINAL_STATUSES, JobsClient, type JobRecord, type JobStatus, type SubmitOptions } from "./jobs-client.js";

export interface RunOptions {
  webhook?: string;
  policy?: SubmitOptions["policy"];
}

/** A submitted job. `C` is the type of a stream chunk's output for streaming functions. */
export interface JobHandle<O, C = unknown> {
  readonly id: string;
  readonly endpointName: string;
  /** The job record now. */
  status(): Promise<JobRecord<O>>;
  /** Wait for the job to end; resolves with its output, rejects with a JobFailedError unless COMPLETED. */
  wait(): Promise<O>;
  /** Iterate the stream chunks' outputs as they arrive, until the job ends. */
  stream(): AsyncIterable<C>;
  cancel(): Promise<void>;
}

/** A remote job ended in a state other than COMPLETED. Carries the job id and the worker's message. */
export class JobFailedError extends Error {
  readonly jobId: string;
  readonly status: JobStatus;
  readonly endpointName: string;
  constructor(endpointName: string, record: JobRecord) {
    super(`Job ${record.id} on endpoint "${endpointName}" ended ${record.status}` + (record.error ? `: ${record.error}` : ""));
    this.name = "JobFailedError";
    this.jobId = record.id;
    this.status = record.status;
    this.endpointName = endpointName;
  }
}

async function clientFor(endpointName: string): Promise<JobsClient> {
  const target = await resolveEndpoint(endpointName);
  return new JobsClient(target.url, target.apiKey);
}

function outcome<O>(endpointName: string, record: JobRecord<O>): O {
  if (record.status !== "COMPLETED") throw new JobFailedError(endpointName, record);
  return record.output as O;
}

export async function callRemote(endpointName: string, functionName: string | undefined, input: unknown): Promise<unknown> {
  const client = await clientFor(endpointName);
  const record = await client.runsync(input, { function: functionName, wait: 300_000 });
  if (FINAL_STATUSES.includes(record.status)) return outcome(endpointName, record);
  return outcome(endpointName, await client.waitFor(record.id));
}

export async function submitRemote(
  endpointName: string,
  functionName: string | undefined,
  input: unknown,
  options: RunOptions = {},
): Promise<JobHandle<unknown, unknown>> {
  const client = await clientFor(endpointName);
  const { id } = await client.run(input, { function: functionName, ...options });
  return {
    id,
    endpointName,
    status: () => client.status(id),
    wait: async () => outcome(endpointName, await client.waitFor(id)),
    stream: () => iterateStream(client, endpointName, id),
    cancel: async () => {
      await client.cancel(id);
    },
  };
}

async function* iterateStream(client: JobsClient, endpointName: string, id: string): AsyncGenerator<unknown> {
  for (;;) {
    const { status, stream } = await client.stream(id);
    for (const chunk of stream) yield chunk.output;
    if (FINAL_STATUSES.includes(status)) {
      if (status !== "COMPLETED") throw new JobFailedError(endpointName, await client.status(id));
      return;
    }
  }
}

export async function* streamRemote(endpointName: string, functionName: string | undefined, input: unknown) {
  const handle = await submitRemote(endpointName, functionName, input);
  yield* handle.stream();
}
