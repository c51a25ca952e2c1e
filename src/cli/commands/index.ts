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

export type RegisterCommand = (program: Command) => void;

export const commands: RegisterCommand[] = [];
commands.push(dev, logs);
commands.push(build);
commands.push(init);
commands.push(server);
commands.push(images);
commands.push(volume, endpoint, template, keys);
commands.push(deploy, undeploy, rollback, update, app, env);
commands.push(login, run, jobs);
commands.push(doctor, completion, secret);
commands.push(usage);
