// The deploy `svc dev`, previews and the tests make without HTTP (Service.deploy): the owner's key checked, the
// build taken from a local file and activated at once through the same deploy module as the HTTP routes; its
// refusals are worded for whoever deploys from a terminal.

import { UserError } from "../../errors.js";
import type { Manifest } from "svc/internal";
import { DEFAULT_USER, type KeyRing } from "../keys/auth.js";
import type { EndpointRow } from "../store/types.js";
import { DeployError, type Deployments, type ReleaseCheck } from "./deployments.js";

export interface InProcessDeploy {
  app: string;
  env: string;
  manifest: Manifest;
  artifactPath: string;
  /** Deploy as the owner of this API key (default: the operator's user). */
  ownerKey?: string;
}

/** What a check refused, said of the app being deployed (the HTTP routes say it of the build or release). */
const REFUSED: Record<ReleaseCheck, string> = {
  secrets: "The app names secrets that are not set; nothing was deployed",
  "reserved-env": "The app sets environment variables that configuration may not set; nothing was deployed",
  scaler: "The app names a scaling policy the service cannot follow; nothing was deployed",
  "large-outputs": "The app asks for large outputs it cannot have; nothing was deployed",
  volumes: "The app names network volumes it cannot use; nothing was deployed",
  gpus: "The app asks for GPUs this host does not have; nothing was deployed",
  images: "The app names images the Docker engine cannot run; nothing was deployed",
};

/** Deploy and return the endpoints the environment serves once the release is live (ReleaseFailedError if it is not). */
export async function deployInProcess(
  deployments: Deployments,
  keyring: Pick<KeyRing, "authenticate">,
  input: InProcessDeploy,
): Promise<{ endpoints: EndpointRow[]; changed: string[] }> {
  let userId = DEFAULT_USER;
  if (input.ownerKey) {
    const principal = await keyring.authenticate(input.ownerKey);
    if (!principal || principal.worker) throw new UserError("The owner key of this deploy is not a valid API key");
    userId = principal.userId;
  }
  try {
    return await deployments.deployFile({ userId, app: input.app, env: input.env }, { manifest: input.manifest, artifactPath: input.artifactPath });
  } catch (err) {
    if (err instanceof DeployError && err.check) throw new UserError(REFUSED[err.check], { problems: err.problems, cause: err });
    throw err;
  }
}
