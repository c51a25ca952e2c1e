// A streaming function: an async generator. Every `yield` is a stream chunk the caller sees as it arrives.
import { Endpoint } from "svc";

export const tokens = Endpoint({ name: "llm", gpu: "ANY", workers: [0, 1] })(
  async function* tokens(input: { prompt: string }) {
    for (const word of input.prompt.split(/\s+/).filter(Boolean)) {
      yield { text: word.toUpperCase() };
    }
  },
);
