// How a user reaches an endpoint once it runs: its address and a ready-to-paste curl that gets an answer.
// `svc dev`, `svc deploy --preview` and `svc deploy` print these; all pure.

import type { Manifest } from "svc/internal";
import { lbEndpointUrl } from "../service/lb/address.js";

export interface EndpointAccess {
  type: "queue" | "lb";
  /** Queue-based: the job API base `{service}/v2/{id}`; load-balanced: the endpoint's address `{service}/lb/{id}`. */
  url: string;
  /** Function names (queue-based endpoints). */
  functions?: readonly string[];
  /** "METHOD /path" (load-balanced endpoints). */
  routes?: readonly string[];
}

/** `$SVC_API_KEY` when the user has the key in their environment, or the key itself (a local session's). */
export function curlFor(endpoint: EndpointAccess, apiKeyShown = "$SVC_API_KEY"): string {
  return endpoint.type === "lb" ? lbCurl(endpoint.url, endpoint.routes ?? [], apiKeyShown) : queueCurl(endpoint.url, apiKeyShown, endpoint.functions ?? []);
}

/** /runsync with an empty input; names the first function when the endpoint serves several. */
export function queueCurl(url: string, apiKeyShown: string, functions: readonly string[]): string {
  const body = functions.length > 1 ? `{"input":{},"function":${JSON.stringify(functions[0])}}` : '{"input":{}}';
  return `curl -s -X POST ${url}/runsync -H "Authorization: Bearer ${apiKeyShown}" -H "Content-Type: application/json" -d '${body}'`;
}

/** One of a load-balanced endpoint's routes (a GET first: no body needed), its path parameters filled in. */
export function lbCurl(url: string, routes: readonly string[], apiKeyShown: string): string {
  const [method, path] = exampleRoute(routes).split(" ") as [string, string];
  const body = method === "GET" || method === "HEAD" || method === "DELETE" ? "" : ` -H "Content-Type: application/json" -d '{}'`;
  return `curl -s -X ${method} ${url}${examplePath(path)} -H "Authorization: Bearer ${apiKeyShown}"${body}`;
}

function exampleRoute(routes: readonly string[]): string {
  return routes.find((r) => r.startsWith("GET ")) ?? routes[0] ?? "GET /ping";
}

/** "/items/:id" -> "/items/1": a path the route matches, so the pasted command reaches the handler. */
export function examplePath(path: string): string {
  return path
    .split("/")
    .map((segment) => (segment.startsWith(":") ? "1" : segment))
    .join("/");
}

/** An endpoint of a local session (`svc dev`, `svc deploy --preview`) as the user reaches it. */
export interface LocalEndpoint {
  name: string;
  id: string;
  type: "queue" | "lb";
  /** Queue-based: the job API base `{service}/v2/{id}`; load-balanced: `{service}/lb/{id}`. */
  url: string;
  /** Function names (queue-based endpoints). */
  functions: string[];
  /** "METHOD /path" (load-balanced endpoints), sorted. */
  routes: string[];
  /** A ready-to-paste command that gets an answer. */
  curl: string;
}

/** The endpoints of a local session with their local addresses and curls, in the order given. */
export function localEndpoints(
  deployed: ReadonlyArray<{ id: string; name: string; type: "queue" | "lb"; url: string }>,
  manifest: Manifest,
  serviceUrl: string,
  apiKeyShown: string,
): LocalEndpoint[] {
  return deployed.map((e) => {
    const functions = e.type === "queue" ? (manifest.resources[e.name]?.functions.map((f) => f.name) ?? []) : [];
    const routes = e.type === "lb" ? Object.keys(manifest.routes[e.name] ?? {}).sort() : [];
    if (e.type === "lb") {
      const url = lbEndpointUrl(serviceUrl, e.id);
      return { name: e.name, id: e.id, type: e.type, url, functions, routes, curl: lbCurl(url, routes, apiKeyShown) };
    }
    return { name: e.name, id: e.id, type: e.type, url: e.url, functions, routes, curl: queueCurl(e.url, apiKeyShown, functions) };
  });
}
