// A queue-based GPU function. Jobs queue up; a worker on the first available GPU type runs them.
import { Endpoint } from "svc";

export const upscale = Endpoint({ name: "gpu-worker", gpu: ["ADA_24", "AMPERE_48"], workers: [0, 3] })(
  // Every field has a default, so an empty input ({}) answers too.
  async function upscale(input: { url?: string; factor?: number }) {
    const url = input.url ?? "https://example.com/cat.png";
    const factor = input.factor ?? 2;
    // Replace with real work (load a model, process the image...).
    return { url, factor, width: 512 * factor, height: 512 * factor };
  },
);
