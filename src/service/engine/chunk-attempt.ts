// Which attempt of a job a stream chunk came from (docs/job-api.md, "Stream"). A job runs again when an attempt
// does not count (its worker died, its lease lapsed, it failed with retries left, or `/retry`). The chunks of the
// dropped attempt that no reader had yet are deleted, but a reader cannot un-read the ones it already got: so a
// chunk of a second or later attempt carries `attempt`, and such a reader can tell where the attempt that counts
// begins. First attempts (nearly every job) keep the spec's plain `{output, metrics?}`.

/** Room the mark takes in a chunk's JSON, kept free when splitting so that a marked chunk stays within 1 MB. */
export const ATTEMPT_MARK_BYTES = 32;

/** `piece` (the JSON text of one chunk object) with `"attempt": n` added when `attempt` is a re-run. */
export function markAttempt(piece: string, attempt: number): string {
  if (!(attempt > 1)) return piece;
  // A chunk's JSON is always an object ("{...}", at least its output): the mark goes before its closing brace,
  // without parsing up to 1 MB again. Should a worker have sent an `attempt` of its own, this one comes last and
  // is the one JSON readers keep.
  return `${piece.slice(0, -1)},"attempt":${Math.floor(attempt)}}`;
}
