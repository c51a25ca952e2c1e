// A class endpoint: one instance per worker, so expensive setup (a model) happens once in the constructor.
// Every public method is a function of the endpoint.
import { Endpoint } from "svc";

@Endpoint({ name: "embedder", gpu: "ANY", workers: [0, 2] })
export class Embedder {
  private readonly dimensions = 8;

  // Without a text ({}), it embeds a default one.
  async embed(input: { text?: string }) {
    const text = input.text ?? "hello from svc";
    const vector = new Array<number>(this.dimensions).fill(0);
    for (let i = 0; i < text.length; i++) vector[i % this.dimensions]! += text.charCodeAt(i) / 1000;
    return { vector };
  }
}
