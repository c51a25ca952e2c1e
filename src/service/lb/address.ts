// Where a load-balanced endpoint is reached and where its workers are: the endpoint's URL, which endpoint and path
// a request addresses (by its path, or by an `{id}.lb.localhost` host), and the check of the address a worker
// registers. Pure; apart from the balancer (index.ts) because the dispatcher, the LB front, the worker routes and
// the deploy and management answers need these without the balancer.

export function lbEndpointUrl(serviceUrl: string, endpointId: string): string {
  return `${serviceUrl.replace(/\/+$/, "")}/lb/${endpointId}`;
}

/** Which LB endpoint and path a request addresses, from its path or Host header. Pure. */
export function lbTarget(rawUrl: string, host: string | undefined): { endpointId: string; path: string } | undefined {
  // Cheap first tests, no regular expression: every authenticated request (the job API's included) asks this.
  if (rawUrl.startsWith("/lb/")) {
    // /lb/{id}[/path][?query], id of [a-z0-9]
    let end = 4;
    for (; end < rawUrl.length; end++) {
      const c = rawUrl.charCodeAt(end);
      if (!((c >= 97 && c <= 122) || (c >= 48 && c <= 57))) break;
    }
    const after = rawUrl.charCodeAt(end);
    if (end > 4 && (end === rawUrl.length || after === 0x2f || after === 0x3f)) {
      const rest = rawUrl.slice(end);
      return { endpointId: rawUrl.slice(4, end), path: after === 0x2f ? rest : `/${rest}` };
    }
  }
  if (host === undefined || host.length < 14) return undefined;
  const byHost = /^([a-z0-9]+)\.lb\.localhost(:\d+)?$/i.exec(host);
  if (byHost) return { endpointId: byHost[1]!.toLowerCase(), path: rawUrl || "/" };
  return undefined;
}

/** A registered worker's address: http(s), no credentials, no path. Pure; returns a problem or undefined. */
export function addressProblem(address: unknown): string | undefined {
  if (typeof address !== "string") return "$.address: must be a string like http://127.0.0.1:8080";
  try {
    const url = new URL(address);
    if (url.protocol !== "http:" && url.protocol !== "https:") return "$.address: must be an http(s) URL";
    if (url.username || url.password || (url.pathname !== "/" && url.pathname !== "") || url.search) {
      return "$.address: must be scheme://host:port only";
    }
  } catch {
    return "$.address: must be an http(s) URL";
  }
  return undefined;
}
