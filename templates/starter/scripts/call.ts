// Calls deployed (or `svc dev`) endpoint functions like local ones. Run with `npm run call` while
// `svc dev` runs, or with SVC_APP/SVC_ENV and SVC_API_KEY set for a deployed app.
import { connect } from "svc";
import { Embedder } from "../src/embedder.js";
import { upscale } from "../src/gpu.js";
import { tokens } from "../src/llm.js";

const result = await upscale({ url: "https://example.com/cat.png", factor: 4 });
console.log("upscale:", result);

for await (const chunk of tokens({ prompt: "hello from svc" })) console.log("chunk:", chunk.text);

// A class endpoint's methods, through connect(): `weights` says whether its worker loaded them from the volume.
const embedded = await connect(Embedder).embed({ text: "hello from svc" });
console.log("embed:", embedded.weights, embedded.vector.map((v) => v.toFixed(3)).join(" "));
