// The `--store` URL: checked when the configuration is parsed, shown without its password.

/** A store URL as the log and errors show it: without its password. Pure. */
export function redactStoreUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = "***";
    return parsed.toString();
  } catch {
    return "(not a URL)";
  }
}

/** Whether `url` names a store svc can open. Pure. */
export function storeUrlProblem(url: string): string | undefined {
  return /^postgres(ql)?:\/\//.test(url) ? undefined : `must be a postgres:// URL, not "${redactStoreUrl(url)}"`;
}
