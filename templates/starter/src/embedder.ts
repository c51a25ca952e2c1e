// A class endpoint: one instance per worker, so expensive setup (a model) happens once in the constructor.
// Every public method is a function of the endpoint.
import { Endpoint } from "svc";

@Endpoint({ name: "embedder", gpu: "ANY", workers: [0, 2] })
export class Embedder {
  private readonly dimensions = 8;

  async embed(input: { text: string }) {
    const vector = new Array<number>(this.dimensions).fill(0);
    for (let i = 0; i < input.text.length; i++) vector[i % this.dimensions]! += input.text.charCodeAt(i) / 1000;
    return { vector };
  }
}
