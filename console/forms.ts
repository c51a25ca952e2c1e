// Pure helpers of the console's forms (tested in test/console/forms.test.ts).

/** `KEY=value` lines to an env map, and back. Pure. */
export function parseEnv(text: string): { env: Record<string, string>; bad: string[] } {
  const env: Record<string, string> = {};
  const bad: string[] = [];
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (!line || line.startsWith("#")) continue;
    const eq = line.indexOf("=");
    if (eq <= 0) bad.push(line);
    else env[line.slice(0, eq).trim()] = line.slice(eq + 1);
  }
  return { env, bad };
}

export function envText(env: Record<string, string>): string {
  return Object.entries(env)
    .map(([k, v]) => `${k}=${v}`)
    .join("\n");
}

/** The scopes of the form: the ticked ones plus `jobs:<id>` for each endpoint id typed. Pure. */
export function scopesOf(ticked: string[], endpointIds: string): string[] {
  const perEndpoint = endpointIds
    .split(/[\s,]+/)
    .map((s) => s.trim())
    .filter(Boolean)
    .map((id) => `jobs:${id}`);
  return [...ticked, ...perEndpoint];
}
