// A private registry for the tests: Debian's docker-registry on a free port of 127.0.0.1 (the engine pulls from
// loopback without TLS), with htpasswd auth of one user. The htpasswd line is bcrypt, which is all the registry
// accepts: made with Python's `crypt` (the C library's bcrypt, `$2b$`), so no package beyond python3 is needed.

import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type Docker from "dockerode";

export const REGISTRY_BIN = "/usr/bin/docker-registry";

export interface AuthRegistry {
  /** host:port */
  address: string;
  username: string;
  password: string;
  /** Push a local image under `repo:tag` of this registry, with the user's credentials; its reference. */
  push(docker: Docker, image: string, repo: string, tag: string): Promise<string>;
  /** Stop it and remove its files. */
  stop(): Promise<void>;
}

/** Why a private registry cannot run here (no docker-registry, no bcrypt in python3), or undefined. */
export function authRegistryUnavailable(): string | undefined {
  if (!existsSync(REGISTRY_BIN)) return "Debian's docker-registry is not installed";
  const probe = spawnSync("python3", ["-W", "ignore", "-c", "import crypt; print(crypt.crypt('x', crypt.mksalt(crypt.METHOD_BLOWFISH)))"], {
    encoding: "utf8",
  });
  if (probe.status !== 0 || !probe.stdout.startsWith("$2")) return `python3 cannot make a bcrypt hash: ${probe.stderr.trim() || probe.stdout.trim()}`;
  return undefined;
}

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

function bcrypt(password: string): string {
  const r = spawnSync(
    "python3",
    ["-W", "ignore", "-c", "import crypt, sys; print(crypt.crypt(sys.argv[1], crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1 << 6)))", password],
    {
      encoding: "utf8",
    },
  );
  if (r.status !== 0) throw new Error(`python3 could not hash the password: ${r.stderr}`);
  return r.stdout.trim();
}

export async function startAuthRegistry(username = "svc-puller", password = "registry-pass-1"): Promise<AuthRegistry> {
  const work = mkdtempSync(join(tmpdir(), "svc-auth-registry-"));
  const address = `127.0.0.1:${await freePort()}`;
  writeFileSync(join(work, "htpasswd"), `${username}:${bcrypt(password)}\n`);
  const config = join(work, "config.yml");
  writeFileSync(
    config,
    [
      "version: 0.1",
      "log:",
      "  level: warn",
      "storage:",
      "  filesystem:",
      `    rootdirectory: ${join(work, "data")}`,
      "http:",
      `  addr: ${address}`,
      "auth:",
      "  htpasswd:",
      "    realm: svc-test",
      `    path: ${join(work, "htpasswd")}`,
      "",
    ].join("\n"),
  );
  const server: ChildProcess = spawn(REGISTRY_BIN, ["serve", config], { stdio: "ignore" });
  const stop = async () => {
    if (server.exitCode === null && server.signalCode === null) {
      server.kill();
      await new Promise((resolve) => server.once("exit", resolve));
    }
    rmSync(work, { recursive: true, force: true });
  };
  try {
    for (const deadline = Date.now() + 20_000; ; ) {
      // 401 without credentials: it runs, and asks for them.
      const status = await fetch(`http://${address}/v2/`).then(
        (r) => r.status,
        () => 0,
      );
      if (status === 401) break;
      if (Date.now() > deadline) throw new Error(`the registry did not start (last answer ${status})`);
      await new Promise((r) => setTimeout(r, 100));
    }
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    address,
    username,
    password,
    async push(docker, image, repo, tag) {
      const name = `${address}/${repo}`;
      await docker.getImage(image).tag({ repo: name, tag });
      const stream = await docker.getImage(`${name}:${tag}`).push({ tag, authconfig: { username, password, serveraddress: address } });
      await new Promise<void>((resolve, reject) =>
        docker.modem.followProgress(
          stream,
          (err) => (err ? reject(err) : resolve()),
          (event: { error?: string }) => {
            if (event.error) reject(new Error(event.error));
          },
        ),
      );
      return `${name}:${tag}`;
    },
    stop,
  };
}
