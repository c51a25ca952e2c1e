// The seam between the SDK's text-generation plumbing and whatever produces text. The template ships a small
// Markov model (markov.ts); a real backend (an inference server, a native runtime) implements the same shape.

export type ChatRole = "system" | "user" | "assistant" | "tool" | "developer" | "function";

export interface ChatMessage {
  role: ChatRole;
  content: string;
}

/** Sampling parameters, as a chat request names them. Absent means "the backend's default". */
export interface GenerationParams {
  /** Upper bound on generated tokens; textGeneration() enforces it too, a backend may stop earlier. */
  max_tokens?: number;
  /** 0 = always the most likely continuation; higher = more varied. 0..2. */
  temperature?: number;
  /** Nucleus sampling: sample only among the most likely continuations whose probabilities add up to top_p. */
  top_p?: number;
  /** Same seed, same request => same text. Without one, every call differs. */
  seed?: number;
  /** Aborted when the job is cancelled or times out: stop generating. */
  signal?: AbortSignal;
}

/** What a backend may report about its own load, for the stream chunks' metrics. Missing fields count as 0. */
export interface BackendStats {
  /** Fraction (0..1) of the key/value cache held in GPU memory that is in use. */
  gpu_kv_cache_usage?: number;
  /** Fraction (0..1) of the key/value cache swapped out to CPU memory that is in use. */
  cpu_kv_cache_usage?: number;
  /** Requests the backend preempted and swapped out to CPU memory. */
  swapped?: number;
}

export interface TextBackend {
  /** Yields the reply as text pieces (tokens, words, anything); joining them gives the reply. */
  generate(messages: readonly ChatMessage[], params: GenerationParams): AsyncIterable<string>;
  stats?(): BackendStats;
}
