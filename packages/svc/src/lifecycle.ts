// Lifecycle changes go through the command line only (the spec's command-line errors). These functions exist so
// that a call from code fails with a usage error that names the command to run instead.

import { UsageError } from "./errors.js";

function lifecycle(what: string, command: string) {
  return (..._args: unknown[]): never => {
    throw new UsageError(`${what} cannot be done from the SDK: lifecycle changes go through the command line`, `Run \`${command}\` instead.`);
  };
}

export const deploy = lifecycle("Deploying", "svc deploy --env <environment>");
export const undeploy = lifecycle("Undeploying", "svc undeploy [endpoint-name | --all] --env <environment>");
export const update = lifecycle("Updating a deployment", "svc update --env <environment>");
export const createApp = lifecycle("Creating an app", "svc deploy --env <environment>");
export const deleteApp = lifecycle("Deleting an app", "svc app delete <app>");
export const createEnvironment = lifecycle("Creating an environment", "svc env create <environment>");
export const deleteEnvironment = lifecycle("Deleting an environment", "svc env delete <environment>");
