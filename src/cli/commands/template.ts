// `svc template create|list`: templates name the worker image and defaults of REST-created endpoints.
import type { Command } from "commander";
import { defined, envFlag, fields, intFlag, management, table } from "../management.js";
import { createOutput } from "../output.js";

type Template = {
  id: string;
  name: string;
  imageName: string;
  env: Record<string, string>;
  containerDiskInGb: number;
  shmSizeMb: number | null;
  containerRegistryAuthId: string | null;
};

export function register(program: Command): void {
  const template = program.command("template").description("Manage endpoint templates (worker image and defaults)");
  template
    .command("create")
    .description("Create a template; --image svc://<app endpoint id> runs that endpoint's code")
    .requiredOption("--name <name>", "template name")
    .requiredOption("--image <image>", "worker image")
    .option("--env <KEY=VALUE>", "default environment variable (repeatable)", envFlag)
    .option("--disk <gb>", "writable root filesystem in GB (default 10; 0: read-only root)", intFlag("--disk"))
    .option("--shm <mb>", "size of /dev/shm in the image's containers, MiB (default: the engine's)", intFlag("--shm"))
    .option("--registry-auth <id>", "pull the image with this registry auth (svc registry-auth create)")
    .option("--json", "print JSON")
    .action(async (o: { name: string; image: string; env?: Record<string, string>; disk?: number; shm?: number; registryAuth?: string; json?: boolean }) => {
      const t = await management<Template>(
        "POST",
        "/v1/templates",
        defined({ name: o.name, imageName: o.image, env: o.env, containerDiskInGb: o.disk, shmSizeMb: o.shm, containerRegistryAuthId: o.registryAuth }),
      );
      createOutput({ json: o.json }).result(t, () => fields(t));
    });
  template
    .command("list")
    .description("List your templates")
    .option("--json", "print JSON")
    .action(async (o: { json?: boolean }) => {
      const list = await management<Template[]>("GET", "/v1/templates");
      createOutput({ json: o.json }).result(list, () => table(list, ["id", "name", "imageName", "containerDiskInGb"]));
    });
}
