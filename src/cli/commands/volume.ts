// `svc volume create|list|get|update|delete`: network volumes ({base_url}/v2/network-volumes).
// `svc volume cp|ls|rm`: their files, through the service's S3 API. `svc volume keys create|list|revoke`: access
// keys for S3 clients (the AWS CLI, @aws-sdk/client-s3). docs/volumes.md.
import { existsSync, statSync } from "node:fs";
import { basename, join } from "node:path";
import type { Command } from "commander";
import { UserError } from "../../errors.js";
import { localFiles, planCopy, parseVolumePath, uploadKey, VolumeFiles } from "../volume-files.js";
import { confirmDestructive } from "../confirm.js";
import { changes, defined, fields, intFlag, listFlag, management, table } from "../management.js";
import { createOutput, formatBytes } from "../output.js";
import { closestName } from "../suggest.js";
import { findVolume, noSuchVolume, volumeToReuse } from "../volume-names.js";
import { MIN_VOLUME_GB } from "../../service/http/schema.js";

type Volume = { id: string; name: string; size: number; dataCenter: string; type: string; usedBytes?: number };

/** A volume as a person reads it: sizes with their units (JSON keeps the API's numbers). Pure. */
function readableVolume(v: Volume): Record<string, unknown> {
  const { usedBytes, ...rest } = v;
  return { ...rest, size: `${v.size} GB`, ...(usedBytes !== undefined ? { used: formatBytes(usedBytes) } : {}) };
}
type VolumeKey = {
  id: string;
  accessKeyId: string;
  name: string | null;
  readOnly: boolean;
  volumeIds: string[] | null;
  endpoint: string;
  region: string;
  createdAt: number;
  revokedAt: number | null;
  secretAccessKey?: string;
};
const COLUMNS = ["id", "name", "size", "dataCenter", "type"];
const path = (id?: string) => `/v2/network-volumes${id ? `/${encodeURIComponent(id)}` : ""}`;

/**
 * The id of the volume `ref` names: an id as it is, or the name of exactly one of the caller's volumes (as `cp`,
 * `ls`, `rm` and `keys` take them). A name two volumes share is refused rather than guessed; a typo of a name is
 * refused with the name meant; any other ref goes to the service as given, whose 404 then says what to list.
 */
async function volumeIdOf(ref: string): Promise<string> {
  const volumes = await management<Volume[]>("GET", path());
  const found = findVolume(volumes, ref);
  if (found) return found.id;
  if (
    closestName(
      ref,
      volumes.map((v) => v.name),
    ) !== undefined
  )
    throw noSuchVolume(volumes, ref);
  return ref;
}

export function register(program: Command): void {
  const volume = program.command("volume").description("Manage network volumes (persistent storage mounted into workers)");
  volume
    .command("create")
    .description("Create a network volume")
    .requiredOption("--name <name>", "volume name")
    .option("--size <gb>", `size in GB (${MIN_VOLUME_GB} to 4096; default ${MIN_VOLUME_GB}, as a deploy creates them)`, intFlag("--size"), MIN_VOLUME_GB)
    .option("--data-center <id>", "data center", "local")
    .option("--type <type>", "STANDARD or HIGH_PERFORMANCE (default: the data center's primary tier)")
    .option("--reuse", "when you already have a volume of this name, print it instead of refusing (nothing is created or changed)")
    .option("--json", "print the volume as JSON")
    .action(async (o: { name: string; size: number; dataCenter: string; type?: string; reuse?: boolean; json?: boolean }) => {
      const out = createOutput({ json: o.json });
      // The REST API allows two volumes of one name; the CLI does not, since cp, ls, rm and deploys name volumes.
      const existing = volumeToReuse(await management<Volume[]>("GET", path()), o.name, o.reuse === true);
      if (existing) {
        if (!o.json) out.info(`You already have network volume "${o.name}" (${existing.id}); reusing it, nothing was created`);
        return out.result(existing, () => fields(existing));
      }
      const v = await management<Volume>("POST", path(), defined({ name: o.name, size: o.size, dataCenter: o.dataCenter, type: o.type }));
      out.result(v, () => fields(v));
    });
  volume
    .command("list")
    .description("List your network volumes")
    .option("--json", "print JSON")
    .action(async (o: { json?: boolean }) => {
      const list = await management<Volume[]>("GET", path());
      createOutput({ json: o.json }).result(list, () => table(list.map(readableVolume), COLUMNS));
    });
  volume
    .command("get")
    .description("Show one network volume")
    .argument("<volume>", "volume id or name")
    .option("--json", "print JSON")
    .action(async (ref: string, o: { json?: boolean }) => {
      const v = await management<Volume>("GET", path(await volumeIdOf(ref)));
      createOutput({ json: o.json }).result(v, () => fields(readableVolume(v)));
    });
  volume
    .command("update")
    .description("Rename or resize a network volume (smaller only while its files fit; data center and type are fixed)")
    .argument("<volume>", "volume id or name")
    .option("--name <name>", "new name")
    .option("--size <gb>", "new size in GB (smaller only while the files fit)", intFlag("--size"))
    .option("--json", "print JSON")
    .action(async (ref: string, o: { name?: string; size?: number; json?: boolean }) => {
      const body = changes({ name: o.name, size: o.size }, "svc volume update");
      const v = await management<Volume>("PATCH", path(await volumeIdOf(ref)), body);
      createOutput({ json: o.json }).result(v, () => fields(v));
    });
  volume
    .command("delete")
    .description("Delete a network volume and everything on it")
    .argument("<volume>", "volume id or name")
    .option("--yes", "do not ask for confirmation (required without a terminal)")
    .option("--json", "print JSON")
    .action(async (ref: string, o: { yes?: boolean; json?: boolean }) => {
      const out = createOutput({ json: o.json });
      // Fetched first: the question names what goes, and a wrong id fails before anything is asked.
      const id = await volumeIdOf(ref);
      const v = await management<Volume>("GET", path(id));
      await confirmDestructive(out, o.yes, `deletes network volume "${v.name}" (${id}, ${v.size} GB) and everything on it`);
      await management("DELETE", path(id));
      out.result({ id, deleted: true }, () => `deleted network volume ${id}`);
    });

  registerKeys(volume);
  registerFiles(volume);
}

function registerKeys(volume: Command): void {
  const keys = volume.command("keys").description("Access keys for the S3 API on your volumes (AWS CLI, AWS SDKs)");
  const readable = (k: VolumeKey) => ({
    ...k,
    volumeIds: k.volumeIds ?? "all",
    createdAt: new Date(k.createdAt).toISOString(),
    revokedAt: k.revokedAt === null ? "-" : new Date(k.revokedAt).toISOString(),
  });
  keys
    .command("create")
    .description("Create an access key; its secret is printed once")
    .option("--read-only", "reads only (list, get): every write is refused")
    .option("--volume <volumes>", "only these volumes (ids or names, comma separated, repeatable; default: all yours)", listFlag)
    .option("--name <name>", "a name to recognise it by")
    .option("--json", "print JSON (accessKeyId, secretAccessKey, endpoint, region, ...)")
    .action(async (o: { readOnly?: boolean; volume?: string[]; name?: string; json?: boolean }) => {
      const files = new VolumeFiles();
      const volumeIds = o.volume === undefined ? undefined : await Promise.all(o.volume.map((ref) => files.volumeId(ref)));
      const k = await management<VolumeKey>("POST", "/v1/volume-keys", defined({ readOnly: o.readOnly === true, volumeIds, name: o.name }));
      const out = createOutput({ json: o.json });
      if (!o.json)
        out.info(
          "Keep the secret now: it is not shown again. Use it as AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY with the endpoint below (path-style addressing).",
        );
      out.result(k, () => fields(readable(k)));
    });
  keys
    .command("list")
    .description("List your access keys (secrets are never shown)")
    .option("--json", "print JSON")
    .action(async (o: { json?: boolean }) => {
      const list = await management<VolumeKey[]>("GET", "/v1/volume-keys");
      createOutput({ json: o.json }).result(list, () => table(list.map(readable), ["accessKeyId", "name", "readOnly", "volumeIds", "createdAt", "revokedAt"]));
    });
  keys
    .command("revoke")
    .description("Revoke an access key (refused from the next request on)")
    .argument("<accessKeyId>", "the key's access key id")
    .option("--yes", "do not ask for confirmation (required without a terminal)")
    .option("--json", "print JSON")
    .action(async (id: string, o: { yes?: boolean; json?: boolean }) => {
      const out = createOutput({ json: o.json });
      const k = await management<VolumeKey>("GET", `/v1/volume-keys/${encodeURIComponent(id)}`);
      await confirmDestructive(out, o.yes, `revokes volume access key ${id}${k.name ? ` ("${k.name}")` : ""}: S3 clients using it are refused from then on`);
      const revoked = await management<VolumeKey>("DELETE", `/v1/volume-keys/${encodeURIComponent(id)}`);
      out.result(revoked, () => `revoked volume access key ${revoked.accessKeyId}`);
    });
}

function registerFiles(volume: Command): void {
  volume
    .command("cp")
    .description("Copy files to or from a volume: svc volume cp <local> <volume>:<path>, or back (volume by id or name)")
    .argument("<from>", "a local path, or <volume>:<path>")
    .argument("<to>", "a local path, or <volume>:<path> (a path ending in / is a folder)")
    .option("-r, --recursive", "copy a folder and everything in it")
    .option("--json", "print JSON")
    .action(async (from: string, to: string, o: { recursive?: boolean; json?: boolean }) => {
      const plan = planCopy(from, to);
      const files = new VolumeFiles();
      const volumeId = await files.volumeId(plan.remote.volume);
      const copied: Array<{ from: string; to: string; bytes: number }> = [];
      const out = createOutput({ json: o.json });
      if (plan.direction === "up") {
        if (!existsSync(plan.local)) throw new UserError(`No file or folder ${plan.local}`);
        if (statSync(plan.local).isDirectory()) {
          if (!o.recursive) throw new UserError(`${plan.local} is a folder`, { hint: "Copy it with --recursive." });
          const base = plan.remote.path === "" || plan.remote.path.endsWith("/") ? plan.remote.path : `${plan.remote.path}/`;
          for (const rel of await localFiles(plan.local)) {
            const key = `${base}${rel}`;
            copied.push({ from: join(plan.local, rel), to: `${plan.remote.volume}:${key}`, bytes: await files.upload(join(plan.local, rel), volumeId, key) });
            if (!o.json) out.info(`uploaded ${join(plan.local, rel)} -> ${plan.remote.volume}:${key}`);
          }
        } else {
          const key = uploadKey(plan.remote.path, basename(plan.local));
          copied.push({ from: plan.local, to: `${plan.remote.volume}:${key}`, bytes: await files.upload(plan.local, volumeId, key) });
        }
      } else if (o.recursive) {
        const prefix = plan.remote.path === "" || plan.remote.path.endsWith("/") ? plan.remote.path : `${plan.remote.path}/`;
        const { objects } = await files.list(volumeId, prefix);
        if (objects.length === 0) throw new UserError(`Nothing under ${plan.remote.volume}:${prefix}`);
        for (const obj of objects) {
          const local = join(plan.local, ...obj.key.slice(prefix.length).split("/"));
          copied.push({ from: `${plan.remote.volume}:${obj.key}`, to: local, bytes: await files.download(volumeId, obj.key, local) });
          if (!o.json) out.info(`downloaded ${plan.remote.volume}:${obj.key} -> ${local}`);
        }
      } else {
        if (plan.remote.path === "" || plan.remote.path.endsWith("/"))
          throw new UserError(`${plan.remote.volume}:${plan.remote.path} is a folder`, { hint: "Copy it with --recursive." });
        const intoFolder = to.endsWith("/") || (existsSync(plan.local) && statSync(plan.local).isDirectory());
        const local = intoFolder ? join(plan.local, basename(plan.remote.path)) : plan.local;
        if (!(await files.exists(volumeId, plan.remote.path))) {
          const under = await files.list(volumeId, `${plan.remote.path}/`, "/");
          if (under.objects.length > 0 || under.folders.length > 0)
            throw new UserError(`${plan.remote.volume}:${plan.remote.path} is a folder`, { hint: "Copy it with --recursive." });
          throw new UserError(`No file ${plan.remote.path} in volume ${plan.remote.volume}`, {
            hint: `See what it holds with \`svc volume ls ${plan.remote.volume}\`.`,
          });
        }
        copied.push({ from: `${plan.remote.volume}:${plan.remote.path}`, to: local, bytes: await files.download(volumeId, plan.remote.path, local) });
      }
      out.result({ copied }, () => copied.map((c) => `${c.from} -> ${c.to} (${c.bytes} bytes)`).join("\n"));
    });
  volume
    .command("ls")
    .description("List the files of a volume: svc volume ls <volume>[:<prefix>] (one folder level unless --recursive)")
    .argument("<target>", "<volume> or <volume>:<prefix>")
    .option("-r, --recursive", "every file under the prefix")
    .option("--json", "print JSON")
    .action(async (target: string, o: { recursive?: boolean; json?: boolean }) => {
      const where = parseVolumePath(target) ?? { volume: target, path: "" };
      const files = new VolumeFiles();
      const listing = await files.list(await files.volumeId(where.volume), where.path, o.recursive ? undefined : "/");
      createOutput({ json: o.json }).result(listing, () =>
        listing.objects.length + listing.folders.length === 0
          ? "(none)"
          : [
              ...listing.folders.map((f) => `${"".padEnd(24)} ${"PRE".padStart(12)} ${f}`),
              ...listing.objects.map((f) => `${f.lastModified.padEnd(24)} ${String(f.size).padStart(12)} ${f.key}`),
            ].join("\n"),
      );
    });
  volume
    .command("rm")
    .description("Delete files of a volume: svc volume rm <volume>:<path> (a folder's files with --recursive)")
    .argument("<target>", "<volume>:<path>")
    .option("-r, --recursive", "every file under the path")
    .option("--yes", "do not ask for confirmation of a recursive delete (required without a terminal)")
    .option("--json", "print JSON")
    .action(async (target: string, o: { recursive?: boolean; yes?: boolean; json?: boolean }) => {
      const where = parseVolumePath(target);
      if (!where || where.path === "") throw new UserError(`Name a file as <volume>:<path>, not "${target}"`);
      const files = new VolumeFiles();
      const volumeId = await files.volumeId(where.volume);
      const out = createOutput({ json: o.json });
      let keys: string[];
      if (o.recursive) {
        const prefix = where.path.endsWith("/") ? where.path : `${where.path}/`;
        keys = (await files.list(volumeId, prefix)).objects.map((x) => x.key);
        if (keys.length === 0) throw new UserError(`Nothing under ${where.volume}:${prefix}`);
        await confirmDestructive(out, o.yes, `deletes ${keys.length} file(s) under ${where.volume}:${prefix}`);
      } else {
        if (!(await files.exists(volumeId, where.path)))
          throw new UserError(`No file ${where.path} in volume ${where.volume}`, { hint: `See what it holds with \`svc volume ls ${where.volume}\`.` });
        keys = [where.path];
      }
      for (const key of keys) await files.remove(volumeId, key);
      out.result({ deleted: keys }, () => keys.map((k) => `deleted ${where.volume}:${k}`).join("\n"));
    });
}
