// One webhook attempt: a POST over node:http(s) whose socket connects only to addresses the address policy checked
// (address-policy.ts: its `lookup` refuses the connection otherwise). Redirects are not followed: a 3xx is the
// attempt's answer, as any other non-2xx, so a receiver cannot bounce a delivery to an address it could not name.

import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import { WebhookRefused, type WebhookAddressPolicy } from "./address-policy.js";

export interface WebhookPost {
  url: string;
  headers: Record<string, string>;
  body: string;
  /** The whole attempt's time limit, from the connection to the answer's status line. */
  timeoutMs: number;
}

/**
 * POST `post.body` to `post.url`: the receiver's status once its answer's head arrives (its body is not read). Throws
 * WebhookRefused when the policy refuses the URL or an address it resolves to, and the connection's error otherwise.
 */
export function postWebhook(post: WebhookPost, policy: WebhookAddressPolicy): Promise<number> {
  const refused = policy.literal(post.url);
  if (refused) return Promise.reject(new WebhookRefused(refused));
  const url = new URL(post.url);
  const send = url.protocol === "https:" ? httpsRequest : httpRequest;
  const signal = AbortSignal.timeout(post.timeoutMs);
  return new Promise<number>((resolve, reject) => {
    const req = send(
      url,
      {
        method: "POST",
        headers: { ...post.headers, "content-length": String(Buffer.byteLength(post.body)) },
        // A connection of its own: never one a pool opened to another name, never kept for the next.
        agent: false,
        lookup: policy.lookupFor(url),
        signal,
      },
      (res) => {
        resolve(res.statusCode ?? 0);
        // The status is what counts: a receiver's body (however long) is not waited for.
        res.destroy();
      },
    );
    req.on("error", (err) => reject(signal.aborted && !(err instanceof WebhookRefused) ? new Error(`no answer within ${post.timeoutMs} ms`) : err));
    req.end(post.body);
  });
}
