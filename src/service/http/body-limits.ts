// The largest request bodies of the job API: read by its routes and published in the OpenAPI document.

/** `/run` bodies (the spec: 10 MB). */
export const RUN_BODY_LIMIT = 10 * 1024 * 1024;
/** `/runsync` bodies (the spec: 20 MB). */
export const RUNSYNC_BODY_LIMIT = 20 * 1024 * 1024;
