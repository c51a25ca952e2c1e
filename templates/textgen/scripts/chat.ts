// Stream a reply from the textgen endpoint of the current context (a running `svc dev`, or SVC_APP/SVC_ENV).
import { connect } from "svc";
import { TextGen } from "../src/textgen.js";

const prompt = process.argv.slice(2).join(" ") || "Tell me about the lighthouse.";
for await (const chunk of connect(TextGen).chat({ messages: [{ role: "user", content: prompt }], max_tokens: 80 })) {
  process.stdout.write(chunk.text.join(""));
}
process.stdout.write("\n");
