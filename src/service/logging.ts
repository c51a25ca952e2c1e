// The service's operator messages (worker starts, storage trouble, internal errors): one logger they all go
// through. Human lines on stderr by default; with `--log-format json` (SVC_LOG_FORMAT=json) one JSON object a line,
// written by pino, that log shippers read without parsing prose: time, level, msg, and the endpoint, job, worker
// and request id a message is about, where the caller knows them.

/** What a message is about, when known. Bounded to these names so that a query over the lines can rely on them. */
export interface LogFields {
  endpoint?: string;
  job?: string;
  worker?: string;
  requestId?: string;
}

/** An operator message, with what it is about. */
export type Log = (message: string, fields?: LogFields) => void;

export interface OperatorLog {
  info: Log;
  warn: Log;
  error: Log;
}

export type LogFormat = "human" | "json";

/**
 * The JSON logger: pino writing synchronously to `fd` (stderr), so that lines keep their order with the process's
 * other output and the last ones before an exit are not lost. pino is imported only for this format.
 */
export async function jsonLog(fd = 2): Promise<OperatorLog> {
  const { pino } = await import("pino");
  const logger = pino(
    {
      // The fields a line is about, without the host's name and pid on every line.
      base: undefined,
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    pino.destination({ fd, sync: true }),
  );
  const at =
    (level: "info" | "warn" | "error"): Log =>
    (message, fields) =>
      logger[level](fields ?? {}, message);
  return { info: at("info"), warn: at("warn"), error: at("error") };
}
