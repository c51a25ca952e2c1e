import { Endpoint } from "svc";

// A queue-based endpoint function: callers send {input}, the worker returns the output.
export const hello = Endpoint({ name: "hello", workers: [0, 2] })(async function hello(input: { name: string }) {
  return { greeting: `Hello, ${input.name}!`, servedBy: process.env.SVC_WORKER_ID };
});

// A streaming endpoint function: every yield is one stream chunk.
export const countdown = Endpoint({ name: "countdown", workers: [0, 1] })(async function* countdown(input: { from: number }) {
  for (let n = input.from; n >= 0; n--) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    yield { n };
  }
});
