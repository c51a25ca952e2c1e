// A class endpoint: one instance per worker, so expensive setup happens once, in the constructor, not per job.
// Here that setup is loading weights from a network volume: the endpoint names the volume "models", every
// worker sees it at SVC_VOLUME_PATH, and `svc volume cp weights.json models:embedder/weights.json` puts the
// file there (README). Every public method is a function of the endpoint.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Endpoint } from "svc";

/** Where the weights go on the volume. */
export const WEIGHTS_PATH = "embedder/weights.json";

/** What runs when the volume has no weights yet: every dimension weighs the same. */
const BUILT_IN = { dimensions: 8, scale: [1, 1, 1, 1, 1, 1, 1, 1] };

interface Weights {
  dimensions: number;
  scale: number[];
}

function loadWeights(): { weights: Weights; from: string } {
  const volume = process.env.SVC_VOLUME_PATH;
  const file = volume ? join(volume, WEIGHTS_PATH) : undefined;
  if (!file || !existsSync(file)) {
    console.warn(
      `embedder: no weights at ${file ?? `${WEIGHTS_PATH} (this worker has no volume)`}; using the built-in ones. ` +
        `Upload them with: npx svc volume cp weights.json models:${WEIGHTS_PATH}`,
    );
    return { weights: BUILT_IN, from: "built-in" };
  }
  const weights = JSON.parse(readFileSync(file, "utf8")) as Weights;
  // A file that is there but wrong stops the worker with a reason rather than embedding nonsense.
  if (!Number.isInteger(weights.dimensions) || !Array.isArray(weights.scale) || weights.scale.length !== weights.dimensions) {
    throw new Error(`embedder: ${file} must be {"dimensions": n, "scale": [n numbers]}`);
  }
  console.log(`embedder: loaded ${weights.dimensions} weights from the volume (${WEIGHTS_PATH})`);
  return { weights, from: `volume:${WEIGHTS_PATH}` };
}

@Endpoint({ name: "embedder", gpu: "ANY", workers: [0, 2], volume: "models" })
export class Embedder {
  private readonly weights: Weights;
  private readonly weightsFrom: string;

  constructor() {
    const loaded = loadWeights();
    this.weights = loaded.weights;
    this.weightsFrom = loaded.from;
  }

  // Without a text ({}), it embeds a default one.
  async embed(input: { text?: string }) {
    const text = input.text ?? "hello from svc";
    const { dimensions, scale } = this.weights;
    const vector = new Array<number>(dimensions).fill(0);
    for (let i = 0; i < text.length; i++) vector[i % dimensions]! += (text.charCodeAt(i) * scale[i % dimensions]!) / 1000;
    return { vector, weights: this.weightsFrom };
  }
}
