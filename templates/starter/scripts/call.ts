// Calls deployed (or `svc dev`) endpoint functions like local ones. Run with `npm run call` while
// `svc dev` runs, or with SVC_APP/SVC_ENV and SVC_API_KEY set for a deployed app.
import { upscale } from "../src/gpu.js";
import { tokens } from "../src/llm.js";

const result = await upscale({ url: "https://example.com/cat.png", factor: 4 });
console.log("upscale:", result);

for await (const chunk of tokens({ prompt: "hello from svc" })) console.log("chunk:", chunk.text);
