// Queue quotas: how many jobs, and how many bytes of input, one user and one endpoint may have waiting in the
// queue. A submission past either is refused before anything of it is kept (the engine checks before it makes the
// job), so one tenant's flood fills neither the store nor the queue at the others' expense. Pure.

/** Jobs waiting and the UTF-8 bytes of their inputs. */
export interface QueueUsage {
  jobs: number;
  bytes: number;
}

export interface QueueQuotas {
  /** Per user, across all of the user's endpoints. */
  user: QueueUsage;
  /** Per endpoint. */
  endpoint: QueueUsage;
  /** Users whose own per-user quota differs (the operator's `SVC_QUEUE_QUOTA_USERS`), by user id. */
  users?: Readonly<Record<string, Partial<QueueUsage>>>;
}

const GIB = 1024 ** 3;

/**
 * A normal user's queue stays far below these: the job benchmark queues 6,000 jobs ahead of its workers as fast as
 * 16 clients can send them, and 1 GiB is a hundred of the largest `/run` bodies (10 MB). A flood (a loop submitting
 * 9 MB jobs, a runaway loop of small ones) meets them within seconds. Per endpoint they are half, so one runaway
 * endpoint still leaves its owner room on the others. Bytes bound the store's growth: queued inputs are not held in
 * memory beyond a small budget (queue.ts).
 */
export const DEFAULT_QUEUE_QUOTAS: QueueQuotas = {
  user: { jobs: 20_000, bytes: GIB },
  endpoint: { jobs: 10_000, bytes: GIB / 2 },
};

/** Seconds a refused client is told to wait: the queue drains at its workers' pace, so soon is the honest guess. */
export const QUOTA_RETRY_AFTER_S = 5;

/** Which quota a refused submission met: the names the 429's detail and the refusals' metric use. */
export type QuotaLimit = "user_jobs" | "user_bytes" | "endpoint_jobs" | "endpoint_bytes";

/** The per-user quota of `userId`: the operator's override where one is set, else the service's. */
export function userQuota(quotas: QueueQuotas, userId: string | undefined): QueueUsage {
  const own = userId === undefined ? undefined : quotas.users?.[userId];
  return own ? { ...quotas.user, ...own } : quotas.user;
}

/**
 * The quota a job of `bytes` input would exceed, queued beside what is queued now (`user`: undefined when the
 * endpoint's owner is not known, then only the endpoint's quota applies); undefined when it fits.
 */
export function exceededQuota(
  quotas: QueueQuotas,
  usage: { user?: QueueUsage; endpoint: QueueUsage },
  userId: string | undefined,
  bytes: number,
): { limit: QuotaLimit; quota: number } | undefined {
  const own = userQuota(quotas, userId);
  if (usage.user) {
    if (usage.user.jobs + 1 > own.jobs) return { limit: "user_jobs", quota: own.jobs };
    if (usage.user.bytes + bytes > own.bytes) return { limit: "user_bytes", quota: own.bytes };
  }
  if (usage.endpoint.jobs + 1 > quotas.endpoint.jobs) return { limit: "endpoint_jobs", quota: quotas.endpoint.jobs };
  if (usage.endpoint.bytes + bytes > quotas.endpoint.bytes) return { limit: "endpoint_bytes", quota: quotas.endpoint.bytes };
  return undefined;
}

/** The 429's detail: which limit, its value, and what to do. Pure. */
export function quotaDetail(limit: QuotaLimit, quota: number, endpointId: string): string {
  const what = limit.endsWith("_jobs") ? `${quota} queued jobs` : `${quota} bytes of queued input`;
  const whose = limit.startsWith("user_") ? "per user" : `per endpoint (${endpointId})`;
  return `Queue quota exceeded: ${limit} (at most ${what} ${whose}); retry once queued jobs have been taken, or purge the queue`;
}

/**
 * `SVC_QUEUE_QUOTA_USERS`: per-user overrides, `user=jobs:N/bytes:N;user2=jobs:N` (either part may be left out).
 * Throws on anything else, naming the part. Pure.
 */
export function parseUserQuotas(text: string): Record<string, Partial<QueueUsage>> {
  const users: Record<string, Partial<QueueUsage>> = {};
  for (const entry of text
    .split(";")
    .map((e) => e.trim())
    .filter(Boolean)) {
    const m = /^([^=\s]+)=(.+)$/.exec(entry);
    if (!m) throw new Error(`"${entry}" is not <user>=jobs:<n>/bytes:<n>`);
    const own: Partial<QueueUsage> = {};
    for (const part of m[2]!.split("/").map((p) => p.trim())) {
      const q = /^(jobs|bytes):(\d+)$/.exec(part);
      if (!q || Number(q[2]) <= 0 || !Number.isSafeInteger(Number(q[2]))) throw new Error(`"${part}" (user ${m[1]}) is not jobs:<n> or bytes:<n> with n > 0`);
      own[q[1] as keyof QueueUsage] = Number(q[2]);
    }
    users[m[1]!] = own;
  }
  return users;
}
