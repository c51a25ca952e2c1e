// What kind of worker an endpoint runs (svc code, a prebuilt server image, an image built for the provider's
// worker SDK), what its containers are allowed, and what the service says when its driver cannot do what the
// endpoint asks (run images, restore snapshots). Pure.

import type { ContainerAllowances, WorkerDriver } from "../../drivers/types.js";
import type { EndpointRow } from "../store/types.js";
import { endpointImageOf, LIMITS } from "svc/internal";

/**
 * What the service says when an endpoint asks for snapshots its workers' driver cannot restore (its workers start as
 * usual: from a pre-booted runtime where one is kept, else fresh). Pure.
 */
export function snapshotNotice(driver: Pick<WorkerDriver, "name" | "restoresSnapshots">, endpoint: Pick<EndpointRow, "name" | "resource">): string | undefined {
  if (!endpoint.resource.snapshot || driver.restoresSnapshots) return undefined;
  const why =
    driver.name === "docker"
      ? "Docker restores a checkpoint only into the container it was taken from"
      : driver.name === "process"
        ? "its workers run sandboxed, and svc does not restore a sandboxed process tree"
        : `svc checkpoints only local processes, and the ${driver.name} driver runs workers on other machines`;
  return `endpoint ${endpoint.name} has snapshot: true, but the ${driver.name} driver cannot restore snapshots (${why}): its workers start without one, running their initialisation (docs/cold-start.md)`;
}

/**
 * Why the driver cannot start workers of an app's image endpoint (it runs no images), or undefined when it can or
 * the endpoint is another kind (a REST endpoint's row says so itself: its workersMax is 0). Pure.
 */
export function imageNotice(
  driver: Pick<WorkerDriver, "name" | "hasImage" | "pullsImages">,
  endpoint: Pick<EndpointRow, "name" | "type" | "resource">,
): string | undefined {
  const image = endpoint.type === "queue" ? endpointImageOf(endpoint.resource) : undefined;
  // Docker runs the images its engine holds; a Kubernetes cluster pulls them.
  if (!image || typeof driver.hasImage === "function" || driver.pullsImages === true) return undefined;
  return `endpoint ${endpoint.name} runs the image "${image}", and the ${driver.name} driver runs no images: its jobs wait in the queue. Run it where Docker runs workers (\`svc server --workers docker\`, \`svc deploy --preview\`, or \`svc dev\` with a Docker engine answering)`;
}

/** The prebuilt image a load-balanced endpoint runs instead of svc code (REST endpoints from a template). Pure. */
export function prebuiltImageOf(endpoint: EndpointRow): string | undefined {
  return endpoint.type === "lb" && endpoint.artifactPath === "" && endpoint.resource.imageName ? endpoint.resource.imageName : undefined;
}

/**
 * The image a queue endpoint runs instead of svc code (REST endpoints from a template whose image is not
 * `svc://`, and an app's image endpoints, `Endpoint({ name, image })`): a worker built for the provider, which
 * speaks the provider's protocol (docs/provider-workers.md). Pure.
 */
export function providerImageOf(endpoint: EndpointRow): string | undefined {
  if (endpoint.type !== "queue") return undefined;
  const fromApp = endpointImageOf(endpoint.resource);
  if (fromApp) return fromApp;
  const image = endpoint.resource.imageName;
  return endpoint.artifactPath === "" && image && !image.startsWith("svc://") ? image : undefined;
}

/**
 * What an app's image endpoint allows its containers: the /dev/shm and writable root it declares (the root at the
 * templates' default size when it says none). Pure.
 */
export function appContainerAllowances(resource: Pick<EndpointRow["resource"], "shmSizeMb" | "containerDiskInGb">): ContainerAllowances {
  return {
    containerDiskInGb: resource.containerDiskInGb ?? LIMITS.containerDiskInGbDefault,
    ...(resource.shmSizeMb !== undefined ? { shmSizeMb: resource.shmSizeMb } : {}),
  };
}
