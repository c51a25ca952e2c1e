// A streaming function: an async generator. Every `yield` is a stream chunk the caller sees as it arrives.
import { Endpoint } from "svc";

export const tokens = Endpoint({ name: "llm", gpu: "ANY", workers: [0, 1] })(
  // Without a prompt ({}), it streams a default one.
  async function* tokens(input: { prompt?: string }) {
    for (const word of (input.prompt ?? "hello from svc").split(/\s+/).filter(Boolean)) {
      yield { text: word.toUpperCase() };
    }
  },
);
