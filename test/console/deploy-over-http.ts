// How the console tests put an app on a service: as `svc deploy` does it over HTTP (build, upload the artifact by
// its sha256, create the environment, activate the build), so the pages see real releases.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { buildProject } from "../../src/build/index.js";
import { call } from "../service/helpers.js";

/** Deploys `projectDir` to `env` of its app on the service at `url`; the build's id (its artifact's sha256). */
export async function deployOverHttp(url: string, key: string, projectDir: string, env: string): Promise<string> {
  const build = await buildProject(projectDir);
  const bytes = readFileSync(build.artifactPath);
  const sha = createHash("sha256").update(bytes).digest("hex");
  const app = build.manifest.app;
  const upload = await fetch(`${url}/v1/apps/${app}/builds`, { method: "POST", headers: { authorization: `Bearer ${key}`, "x-svc-sha256": sha }, body: bytes });
  if (upload.status >= 300) throw new Error(`upload: ${upload.status} ${await upload.text()}`);
  const created = await call(`${url}/v1/apps/${app}/environments/${env}`, { key, method: "PUT" });
  if (created.status >= 300) throw new Error(`environment: ${created.status} ${created.text}`);
  const activated = await call(`${url}/v1/apps/${app}/environments/${env}/activate`, { key, body: { build: sha, confirmRemove: [] } });
  if (activated.status !== 200) throw new Error(`activate: ${activated.status} ${activated.text}`);
  return sha;
}
