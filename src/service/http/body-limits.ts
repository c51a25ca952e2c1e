// The largest request bodies the routes read: declared on their rows, and the job API's published in the
// OpenAPI document.

/** `/run` bodies (the spec: 10 MB). */
export const RUN_BODY_LIMIT = 10 * 1024 * 1024;
/** `/runsync` bodies (the spec: 20 MB). */
export const RUNSYNC_BODY_LIMIT = 20 * 1024 * 1024;
/** The largest OpenAI-compatible request body (the /runsync limit). */
export const OPENAI_BODY_LIMIT = 20 * 1024 * 1024;
/** Bodies of the worker protocol (a `done` carries whole outputs). */
export const WORKER_BODY_LIMIT = 64 * 1024 * 1024;
/** A management request's JSON body (http/management-request.ts readObjectBody). */
export const SMALL_BODY_LIMIT = 1024 * 1024;
