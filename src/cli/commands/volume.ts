// `svc volume create|list|get|update|delete`: network volumes ({base_url}/v2/network-volumes).
import type { Command } from "commander";
import { confirmDestructive } from "../confirm.js";
import { changes, defined, fields, intFlag, management, table } from "../management.js";
import { createOutput } from "../output.js";

type Volume = { id: string; name: string; size: number; dataCenter: string; type: string };
const COLUMNS = ["id", "name", "size", "dataCenter", "type"];
const path = (id?: string) => `/v2/network-volumes${id ? `/${encodeURIComponent(id)}` : ""}`;

export function register(program: Command): void {
  const volume = program.command("volume").description("Manage network volumes (persistent storage mounted into workers)");
  volume
    .command("create")
    .description("Create a network volume")
    .requiredOption("--name <name>", "volume name")
    .requiredOption("--size <gb>", "size in GB (10 to 4096)", intFlag("--size"))
    .option("--data-center <id>", "data center", "local")
    .option("--type <type>", "STANDARD or HIGH_PERFORMANCE (default: the data center's primary tier)")
    .option("--json", "print the volume as JSON")
    .action(async (o: { name: string; size: number; dataCenter: string; type?: string; json?: boolean }) => {
      const v = await management<Volume>("POST", path(), defined({ name: o.name, size: o.size, dataCenter: o.dataCenter, type: o.type }));
      createOutput({ json: o.json }).result(v, () => fields(v));
    });
  volume
    .command("list")
    .description("List your network volumes")
    .option("--json", "print JSON")
    .action(async (o: { json?: boolean }) => {
      const list = await management<Volume[]>("GET", path());
      createOutput({ json: o.json }).result(list, () => table(list, COLUMNS));
    });
  volume
    .command("get")
    .description("Show one network volume")
    .argument("<id>", "volume id")
    .option("--json", "print JSON")
    .action(async (id: string, o: { json?: boolean }) => {
      const v = await management<Volume>("GET", path(id));
      createOutput({ json: o.json }).result(v, () => fields(v));
    });
  volume
    .command("update")
    .description("Rename or grow a network volume (it never shrinks; data center and type are fixed)")
    .argument("<id>", "volume id")
    .option("--name <name>", "new name")
    .option("--size <gb>", "new size in GB, not smaller than now", intFlag("--size"))
    .option("--json", "print JSON")
    .action(async (id: string, o: { name?: string; size?: number; json?: boolean }) => {
      const v = await management<Volume>("PATCH", path(id), changes({ name: o.name, size: o.size }, "svc volume update"));
      createOutput({ json: o.json }).result(v, () => fields(v));
    });
  volume
    .command("delete")
    .description("Delete a network volume and everything on it")
    .argument("<id>", "volume id")
    .option("--yes", "do not ask for confirmation (required without a terminal)")
    .option("--json", "print JSON")
    .action(async (id: string, o: { yes?: boolean; json?: boolean }) => {
      const out = createOutput({ json: o.json });
      // Fetched first: the question names what goes, and a wrong id fails before anything is asked.
      const v = await management<Volume>("GET", path(id));
      await confirmDestructive(out, o.yes, `deletes network volume "${v.name}" (${id}, ${v.size} GB) and everything on it`);
      await management("DELETE", path(id));
      out.result({ id, deleted: true }, () => `deleted network volume ${id}`);
    });
}
