// Where a network volume's files live on this host, and what bounds them. Every driver that runs workers here
// mounts the volume's directory (<data>/volumes/<id>) into them: the process driver binds it into the sandbox,
// Docker bind-mounts it. Its `size` binds S3 writes always (usage.ts); what a worker writes to the directory
// itself is bound only when the operator turns volume quotas on:
//   off   a plain directory (the default): a worker can write past the size, up to the host disk's free space.
//   loop  the directory is the mount point of an ext4 filesystem of the volume's size, kept in a sparse image file
//         (<data>/volume-images/<id>.ext4) and mounted through a loop device: a write past it fails with ENOSPC
//         inside any worker, on any driver that mounts the directory. Needs root, the loop driver and mkfs.ext4.
// The mounts outlive the service (as the volumes do): a service starting mounts the images not mounted yet, and
// never one twice. docs/design/0021-volume-quotas.md says why loop devices.

import { execFile } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { mkdir, readdir, readFile, rename, rm, rmdir, stat, truncate } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { prepareVolumeDir, volumeDir } from "../../drivers/volume-dir.js";
import { errorMessage } from "../../errors.js";

const run = promisify(execFile);

export type VolumeQuotaMode = "off" | "loop";

/** What the service does with a volume's storage; the management routes and deploys call nothing else. */
export interface VolumeStorage {
  /** Whether a write past a volume's size fails inside workers (the filesystem bounds it). */
  readonly enforced: boolean;
  /** Make a new volume's directory: with quotas, its filesystem of `sizeGb`, mounted there. */
  create(id: string, sizeGb: number): Promise<void>;
  /** Give a volume room for its grown size. */
  grow(id: string, sizeGb: number): Promise<void>;
  /** Why a volume cannot be made smaller now, or undefined when it can (then the S3 usage decides). */
  shrinkRefusal(): string | undefined;
  /** A deleted volume's storage gone: its filesystem unmounted and its image removed, then its directory. */
  remove(id: string): Promise<void>;
  /** At start: every volume's storage ready (mounted where quotas are on). Problems are logged, never thrown. */
  attachAll(volumes: ReadonlyArray<{ id: string; size: number }>): Promise<void>;
}

/** Plain directories: the size binds S3 writes only. */
export function plainVolumeStorage(dataDir: string): VolumeStorage {
  return {
    enforced: false,
    create: async (id) => prepareVolumeDir(volumeDir(dataDir, id)),
    grow: async () => undefined,
    shrinkRefusal: () => undefined,
    remove: (id) => rm(volumeDir(dataDir, id), { recursive: true, force: true }),
    attachAll: async () => undefined,
  };
}

/** Why loop quotas cannot work on this host, or undefined when they can. */
export function loopQuotaProblem(): string | undefined {
  if (process.platform !== "linux") return "volume quotas need Linux (loop devices)";
  if (process.getuid?.() !== 0) return "volume quotas mount a filesystem per volume: svc server must run as root";
  if (!existsSync("/dev/loop-control")) return "volume quotas need the kernel's loop devices (/dev/loop-control is missing)";
  if (!MKFS.some((p) => existsSync(p))) return "volume quotas need mkfs.ext4 (Debian's e2fsprogs)";
  return undefined;
}

const MKFS = ["/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4"];

/** The mount points of this mount namespace, each with what is mounted there (`/proc/self/mountinfo`). Pure. */
export function mountsOf(mountinfo: string): Map<string, string> {
  const mounts = new Map<string, string>();
  for (const line of mountinfo.split("\n")) {
    const [before, after] = line.split(" - ");
    if (!before || !after) continue;
    const point = before.split(" ")[4];
    const source = after.split(" ")[1];
    if (point && source) mounts.set(unescapeMount(point), unescapeMount(source));
  }
  return mounts;
}

/** mountinfo writes space, tab, newline and backslash as octal escapes. */
function unescapeMount(text: string): string {
  return text.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(Number.parseInt(octal, 8)));
}

/** What starting does for one volume, given what is on disk and mounted. Pure. */
export type AttachStep =
  | { kind: "mounted" }
  | { kind: "mount" }
  | { kind: "create" }
  /** A directory with files from before quotas were on: moved into a filesystem of its own. */
  | { kind: "migrate" };

export function planAttach(volume: { hasImage: boolean; mounted: boolean; dirHasFiles: boolean }): AttachStep {
  if (volume.mounted) return { kind: "mounted" };
  if (volume.hasImage) return { kind: "mount" };
  return volume.dirHasFiles ? { kind: "migrate" } : { kind: "create" };
}

/** Filesystems of their own per volume, through loop devices (see the head of this file). */
export class LoopVolumeStorage implements VolumeStorage {
  readonly enforced = true;

  constructor(
    private readonly dataDir: string,
    /** The bytes of one GB of `size` (usage.ts GB_BYTES; smaller in tests). */
    private readonly gbBytes: number,
    private readonly log: (message: string) => void,
  ) {}

  private image(id: string): string {
    return join(this.dataDir, "volume-images", `${id}.ext4`);
  }

  private async mounts(): Promise<Map<string, string>> {
    return mountsOf(await readFile("/proc/self/mountinfo", "utf8"));
  }

  /** A sparse image of `bytes` with an empty ext4 filesystem (no blocks kept for root: workers get all of it). */
  private async makeImage(id: string, bytes: number): Promise<string> {
    const image = this.image(id);
    await mkdir(join(this.dataDir, "volume-images"), { recursive: true, mode: 0o700 });
    await rm(image, { force: true });
    await run("truncate", ["-s", String(bytes), image]);
    await run(MKFS.find((p) => existsSync(p)) ?? "mkfs.ext4", ["-q", "-F", "-m", "0", "-L", id, image]);
    return image;
  }

  /** Mount a volume's image on `dir`, then open it to every worker as a plain volume directory is. */
  private async mountImage(id: string, dir: string, fresh: boolean): Promise<void> {
    await mkdir(dir, { recursive: true });
    await run("mount", ["-o", "loop,nosuid,nodev,noatime", this.image(id), dir]);
    // ext4's lost+found would show as a folder of the volume (S3 listings, workers): a fresh filesystem needs none.
    if (fresh)
      await rmdir(join(dir, "lost+found")).catch((err: NodeJS.ErrnoException) => {
        // Absent is what is wanted; anything else leaves a harmless empty folder, said.
        if (err.code !== "ENOENT") this.log(`network volume ${id}: could not remove its filesystem's lost+found: ${errorMessage(err)}`);
      });
    prepareVolumeDir(dir);
  }

  async create(id: string, sizeGb: number): Promise<void> {
    await this.makeImage(id, sizeGb * this.gbBytes);
    await this.mountImage(id, volumeDir(this.dataDir, id), true);
  }

  async grow(id: string, sizeGb: number): Promise<void> {
    const device = (await this.mounts()).get(volumeDir(this.dataDir, id));
    if (!device?.startsWith("/dev/loop")) throw new Error(`network volume ${id} has no filesystem of its own mounted`);
    // The image first, then the loop device told of its new length, then the filesystem (grown while mounted).
    // Growing a mounted ext4 takes CAP_SYS_RESOURCE (EXT4_IOC_RESIZE_FS): said before anything changes.
    if (!hasCapability(CAP_SYS_RESOURCE))
      throw new Error("growing a mounted filesystem needs the CAP_SYS_RESOURCE capability, which svc server does not have here");
    const image = this.image(id);
    const before = (await stat(image)).size;
    await truncate(image, sizeGb * this.gbBytes);
    try {
      await run("losetup", ["-c", device]);
      await run("resize2fs", [device]);
    } catch (err) {
      // The filesystem keeps its size: so does its image (and the loop device, told again).
      await truncate(image, before);
      await run("losetup", ["-c", device]).catch((again: unknown) =>
        this.log(`network volume ${id}: its loop device may show the grown size until remounted: ${errorMessage(again)}`),
      );
      throw err;
    }
  }

  shrinkRefusal(): string | undefined {
    return "a network volume's size can only grow while volume quotas are on (its filesystem cannot shrink while mounted)";
  }

  async remove(id: string): Promise<void> {
    const dir = volumeDir(this.dataDir, id);
    if ((await this.mounts()).has(dir)) await run("umount", [dir]);
    await rm(this.image(id), { force: true });
    await rm(dir, { recursive: true, force: true });
  }

  async attachAll(volumes: ReadonlyArray<{ id: string; size: number }>): Promise<void> {
    const mounts = await this.mounts();
    for (const v of volumes) {
      const dir = volumeDir(this.dataDir, v.id);
      const step = planAttach({ hasImage: existsSync(this.image(v.id)), mounted: mounts.has(dir), dirHasFiles: await hasFiles(dir) });
      try {
        if (step.kind === "mount") await this.mountImage(v.id, dir, false);
        else if (step.kind === "create") await this.create(v.id, v.size);
        else if (step.kind === "migrate") await this.migrate(v.id, dir, v.size * this.gbBytes);
      } catch (err) {
        this.log(`network volume ${v.id}: no quota (its filesystem could not be ${step.kind === "mount" ? "mounted" : "made"}): ${errorMessage(err)}`);
      }
    }
  }

  /**
   * A volume made before quotas were on: its files copied into a filesystem of its own, which then takes the
   * directory's place. Files over its size leave it as it was (said), never cut short.
   */
  private async migrate(id: string, dir: string, bytes: number): Promise<void> {
    const staging = `${dir}.quota-staging`;
    await this.makeImage(id, bytes);
    await this.mountImage(id, staging, true);
    try {
      await run("cp", ["-a", `${dir}/.`, `${staging}/`]);
    } catch (err) {
      await run("umount", [staging]);
      await rm(staging, { recursive: true, force: true });
      await rm(this.image(id), { force: true });
      throw new Error(`its files do not fit in its size (${errorMessage(err)}); grow it, then restart the service`);
    }
    await run("umount", [staging]);
    await rm(staging, { recursive: true, force: true });
    const previous = `${dir}.pre-quota`;
    await rename(dir, previous);
    await this.mountImage(id, dir, false);
    await rm(previous, { recursive: true, force: true });
    this.log(`network volume ${id}: moved into a filesystem of its size (volume quotas are on)`);
  }
}

const CAP_SYS_RESOURCE = 24;

/** Whether this process holds a capability (its effective set, `/proc/self/status` CapEff). */
export function hasCapability(bit: number, status = readFileSync("/proc/self/status", "utf8")): boolean {
  const hex = /^CapEff:\s*([0-9a-f]+)$/m.exec(status)?.[1];
  return hex !== undefined && (BigInt(`0x${hex}`) & (1n << BigInt(bit))) !== 0n;
}

async function hasFiles(dir: string): Promise<boolean> {
  try {
    if (!(await stat(dir)).isDirectory()) return false;
    return (await readdir(dir)).length > 0;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return false;
    throw err;
  }
}

/** The storage for a mode (`svc server` checks `loopQuotaProblem` first, and refuses to start naming it). */
export function volumeStorage(mode: VolumeQuotaMode, dataDir: string, gbBytes: number, log: (message: string) => void): VolumeStorage {
  return mode === "loop" ? new LoopVolumeStorage(dataDir, gbBytes, log) : plainVolumeStorage(dataDir);
}
