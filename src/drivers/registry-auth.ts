// Images pulled from registries with a user's credentials (a template's `containerRegistryAuthId`): the
// credentials a launch carries, the forms each engine takes them in (Docker's X-Registry-Auth, a Kubernetes
// dockerconfigjson Secret), and a pull that fails saying which image, why, and with which credentials.

import type Docker from "dockerode";
import { UserError } from "../errors.js";
import { dockerMessage } from "./docker-engine.js";

/** A user's registry credentials, opened for one launch: never logged, never in a container's environment. */
export interface RegistryCredentials {
  /** The credentials' name as the user gave it (said in a failed pull's reason). */
  name: string;
  username: string;
  password: string;
}

/** What a program acts on when a pull failed: the endpoint waits with the error's message as its reason. */
export const IMAGE_PULL_FAILED = "IMAGE_PULL_FAILED";

export class ImagePullError extends UserError {
  readonly code = IMAGE_PULL_FAILED;
  constructor(
    readonly image: string,
    readonly why: string,
    credentials: RegistryCredentials | undefined,
    cause?: unknown,
  ) {
    super(`pulling "${image}" failed: ${why}${credentials ? ` (registry auth "${credentials.name}")` : " (no registry auth)"}`, {
      hint: credentials
        ? "Check the image's name and the registry auth's username and password (POST /v1/containerregistryauth), then update the endpoint."
        : "Check the image's name; a private image needs a registry auth on its template (containerRegistryAuthId).",
      cause,
    });
  }
}

/** Whether an error is a failed pull (by its code, whatever module made it). Pure. */
export function isImagePullError(err: unknown): err is ImagePullError {
  return (err as { code?: unknown } | null)?.code === IMAGE_PULL_FAILED;
}

/**
 * The registry an image reference names, as Docker reads it: the part before the first `/` when it has a `.` or
 * a `:` or is `localhost`; otherwise Docker Hub. Pure.
 */
export function registryHostOf(image: string): string {
  const slash = image.indexOf("/");
  const first = slash < 0 ? "" : image.slice(0, slash);
  return first && (first.includes(".") || first.includes(":") || first === "localhost") ? first : "docker.io";
}

/** The auth Docker's API takes for a pull of `image` (X-Registry-Auth, dockerode's `authconfig`). Pure. */
export function dockerAuthConfig(credentials: RegistryCredentials, image: string): { username: string; password: string; serveraddress: string } {
  const host = registryHostOf(image);
  return {
    username: credentials.username,
    password: credentials.password,
    serveraddress: host === "docker.io" ? "https://index.docker.io/v1/" : host,
  };
}

/** A `.dockerconfigjson` (a kubernetes.io/dockerconfigjson Secret's data) for pulls of `image`. Pure. */
export function dockerConfigJson(credentials: RegistryCredentials, image: string): string {
  const { serveraddress } = dockerAuthConfig(credentials, image);
  const auth = Buffer.from(`${credentials.username}:${credentials.password}`).toString("base64");
  return JSON.stringify({ auths: { [serveraddress]: { username: credentials.username, password: credentials.password, auth } } });
}

/** The short reason of an engine's pull error: unauthorized, not found, or the engine's own words. Pure. */
export function pullFailureReason(message: string): string {
  if (/unauthorized|authentication required|no basic auth credentials|denied/i.test(message)) return "unauthorized";
  if (/not found|manifest unknown|name unknown|no such image/i.test(message)) return `not found (${message})`;
  return message;
}

/** Pull `image` into the engine, with the credentials when given; an ImagePullError when it does not arrive. */
export async function pullImage(docker: Docker, image: string, credentials: RegistryCredentials | undefined): Promise<void> {
  try {
    const stream = await docker.pull(image, credentials ? { authconfig: dockerAuthConfig(credentials, image) } : {});
    await new Promise<void>((resolve, reject) => {
      docker.modem.followProgress(
        stream,
        (err: Error | null) => (err ? reject(err) : resolve()),
        (event: { error?: string }) => {
          if (event.error) reject(new Error(event.error));
        },
      );
    });
  } catch (err) {
    throw new ImagePullError(image, pullFailureReason(dockerMessage(err)), credentials, err);
  }
}
