// Every command registers itself here; one file per command.
import type { Command } from "commander";
import { register as dev } from "./dev.js";
import { register as logs } from "./logs.js";
import { register as build } from "./build.js";
import { register as init } from "./init.js";
import { register as server } from "./server.js";
import { register as images } from "./images.js";
import { register as volume } from "./volume.js";
import { register as endpoint } from "./endpoint.js";
import { register as template } from "./template.js";
import { register as keys } from "./keys.js";
import { register as deploy } from "./deploy.js";
import { register as undeploy } from "./undeploy.js";
import { register as rollback } from "./rollback.js";
import { register as update } from "./update.js";
import { register as app } from "./app.js";
import { register as env } from "./env.js";
import { register as login } from "./login.js";
import { register as run } from "./run.js";
import { register as jobs } from "./jobs.js";
import { register as doctor } from "./doctor.js";
import { register as completion } from "./completion.js";
import { register as secret } from "./secret.js";
import { register as usage } from "./usage.js";
import { register as registryAuth } from "./registry-auth.js";

export type RegisterCommand = (program: Command) => void;

/**
 * The commands as `svc --help` lists them: in the order a user meets them, from a new project to its
 * deployment, operating it, and managing the service's resources.
 */
export const commandGroups: Array<{ heading: string; commands: RegisterCommand[] }> = [
  { heading: "Start:", commands: [init, dev, login, doctor] },
  { heading: "Build and deploy:", commands: [build, deploy, update, rollback, undeploy, images] },
  { heading: "Operate:", commands: [run, jobs, logs, app, env, usage] },
  { heading: "Manage:", commands: [endpoint, volume, secret, template, registryAuth, keys, server, completion] },
];

export const commands: RegisterCommand[] = commandGroups.flatMap((g) => g.commands);
