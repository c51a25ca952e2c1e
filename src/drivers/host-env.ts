// What of the service's own environment a process worker gets: an allow-list, never the whole environment. The
// service's environment holds its admin key, cloud credentials, database URLs; a worker runs a tenant's code.
// The operator extends the list with SVC_WORKER_ENV_ALLOW (docs/service.md); svc's own SVC_* settings are never
// passed, whatever the list says (the protocol variables are the driver's to set). Pure.

/** The host variables every process worker gets when the service has them: locale, time zone, proxies, TLS roots. */
export const DEFAULT_WORKER_ENV_ALLOW: readonly string[] = [
  "PATH",
  "LANG",
  "LANGUAGE",
  "LC_*",
  "TZ",
  "HTTP_PROXY",
  "HTTPS_PROXY",
  "NO_PROXY",
  "ALL_PROXY",
  "http_proxy",
  "https_proxy",
  "no_proxy",
  "all_proxy",
  "SSL_CERT_FILE",
  "SSL_CERT_DIR",
];

/** Whether `name` is allowed by `patterns` (exact names, or a prefix ending in `*`). */
export function envNameAllowed(name: string, patterns: readonly string[]): boolean {
  if (name.startsWith("SVC_")) return false;
  return patterns.some((p) => (p.endsWith("*") ? name.startsWith(p.slice(0, -1)) : name === p));
}

/** Why an operator's allow-list entry cannot be used, or undefined. */
export function envPatternProblem(pattern: string): string | undefined {
  if (pattern === "*") return `"*" would pass the service's whole environment`;
  if (!/^[A-Za-z_][A-Za-z0-9_]*\*?$/.test(pattern)) return `"${pattern}" is not a variable name (a trailing * matches a prefix)`;
  if (pattern.startsWith("SVC_")) return `"${pattern}": svc's own settings are never passed to workers`;
  return undefined;
}

/** The service's variables a worker gets: those the default list and the operator's extra names allow. */
export function allowedHostEnv(base: Readonly<Record<string, string | undefined>>, extra: readonly string[] = []): Record<string, string> {
  const patterns = [...DEFAULT_WORKER_ENV_ALLOW, ...extra];
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(base)) if (value !== undefined && envNameAllowed(key, patterns)) env[key] = value;
  return env;
}
