// A store that refuses writes for a reason that clears (a full disk, a read-only or failing filesystem, a
// database that is unreachable or failing over): the answer is 503 with Retry-After naming the cause, never a
// bare 500, and nothing of the refused request stays in what the service believes. Errors of other kinds (a
// bug: a constraint violated) stay errors.

import { Refusal } from "../../errors.js";

export type StorageCause = "full" | "read-only" | "io" | "busy" | "unavailable";

const DESCRIPTION: Record<StorageCause, string> = {
  full: "The service's storage is full",
  "read-only": "The service's storage is read-only",
  io: "The service's storage fails to write (I/O error)",
  busy: "The service's storage is busy",
  unavailable: "The service's storage is unavailable",
};

/** Seconds a refused client is told to wait. */
export const STORAGE_RETRY_AFTER_S = 5;

/** Which condition a store error is, by its code (SQLite's, the system's; PostgreSQL's SQLSTATE too). Pure. */
export function storageCause(err: unknown): StorageCause | undefined {
  const code = String((err as { code?: unknown } | null)?.code ?? "");
  if (code === "SQLITE_FULL" || code === "ENOSPC" || code === "EDQUOT" || code === "53100") return "full";
  if (code.startsWith("SQLITE_READONLY") || code === "EROFS" || code === "25006") return "read-only";
  if (code.startsWith("SQLITE_IOERR") || code === "EIO" || code === "58030") return "io";
  if (code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED") || code === "40001" || code === "40P01") return "busy";
  if (code.startsWith("SQLITE_CANTOPEN") || code === "ECONNREFUSED" || code === "ECONNRESET" || code.startsWith("08") || code === "57P01") return "unavailable";
  return undefined;
}

export function describeStorage(cause: StorageCause): string {
  return DESCRIPTION[cause];
}

/** The refusal a request gets while the store refuses writes. */
export class StorageUnavailable extends Refusal {
  constructor(
    readonly condition: StorageCause,
    readonly underlying: unknown,
  ) {
    super("unavailable", `${DESCRIPTION[condition]}: nothing of this request was kept; retry in a few seconds`, { retryAfterS: STORAGE_RETRY_AFTER_S });
  }
}

/** The store's state as /health reports it. */
export interface StorageState {
  ok: boolean;
  cause?: StorageCause;
  /** What the store said, first time. */
  message?: string;
  since?: number;
  /** Worker log lines dropped because the store refused them, since the start (only when some were). */
  droppedLogLines?: number;
}

/**
 * A route's failure as the service answers it: a store that cannot be reached or written (a read on a database
 * that is down) becomes StorageUnavailable, a 503 naming the cause; anything else is left as it is.
 */
export function asRouteFailure(thrown: unknown): unknown {
  // A refusal already says what to answer (a storage fault among them); an HTTP problem carries no store code.
  const cause = thrown instanceof Refusal ? undefined : storageCause(thrown);
  return cause ? new StorageUnavailable(cause, thrown) : thrown;
}
