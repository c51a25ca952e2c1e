// A throwaway PostgreSQL server for the tests and the benches: Debian's `postgresql` binaries, a cluster of its own
// in a temporary directory, listening on a free port of 127.0.0.1 (and a Unix socket in that directory).
// PostgreSQL refuses to run as root, so as root the cluster belongs to the `postgres` user and is started through
// `runuser`. Plain JavaScript so that bench/*.mjs can use it; test/postgres.ts gives it types.
//
// `SVC_TEST_POSTGRES_URL` (a server the tests may create databases on) replaces the throwaway cluster. Where
// neither is possible, `postgresUnavailable()` says why, and tests skip with that notice (never in CI: .ci/run
// installs the package).
import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
function binDir() {
  const root = "/usr/lib/postgresql";
  if (!existsSync(root)) return void 0;
  const versions = readdirSync(root)
    .filter((v) => existsSync(join(root, v, "bin", "initdb")))
    .sort((a, b) => Number(b) - Number(a));
  return versions[0] === void 0 ? void 0 : join(root, versions[0], "bin");
}
/** Why no server can be started here, or undefined when one can. */
function postgresUnavailable() {
  if (process.env.SVC_TEST_POSTGRES_URL) return void 0;
  if (!binDir()) return "PostgreSQL's server binaries are not installed (Debian: apt-get install postgresql)";
  if (process.getuid?.() === 0 && spawnSync("id", ["-u", "postgres"]).status !== 0) return "no `postgres` user to run the server as";
  return void 0;
}
async function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const port = server.address().port;
      server.close(() => resolve(port));
    });
  });
}
let databaseCounter = 0;
/** Start a server; `durable` keeps fsync and synchronous commits on (benches measure what users get). */
async function startPostgres({ durable = false } = {}) {
  const outside = process.env.SVC_TEST_POSTGRES_URL;
  if (outside) return outsideServer(outside);
  const bin = binDir();
  if (!bin) throw new Error(postgresUnavailable());
  const asRoot = process.getuid?.() === 0;
  const dir = mkdtempSync(join(tmpdir(), "svc-pg-"));
  const data = join(dir, "data");
  const user = asRoot ? "postgres" : (process.env.USER ?? "postgres");
  if (asRoot) {
    const uid = Number(execFileSync("id", ["-u", "postgres"]).toString());
    const gid = Number(execFileSync("id", ["-g", "postgres"]).toString());
    chownSync(dir, uid, gid);
    chmodSync(dir, 448);
  }
  const run = (cmd, args) => {
    const argv = asRoot ? ["runuser", "-u", "postgres", "--", join(bin, cmd), ...args] : [join(bin, cmd), ...args];
    const result = spawnSync(argv[0], argv.slice(1), { encoding: "utf8", cwd: dir });
    if (result.status !== 0)
      throw new Error(`${cmd} failed (${result.status}):
${result.stdout}
${result.stderr}`);
  };
  run("initdb", ["-D", data, "-A", "trust", "-U", user, "--no-sync", "-E", "UTF8", "--locale", "C"]);
  const port = await freePort();
  // Small and fast: the tests' durability is not what is measured (fsync off), a few connections per service.
  // `durable: true` (the benches) keeps PostgreSQL's defaults.
  const options = durable
    ? `-c port=${port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=${dir} -c max_connections=200`
    : `-c port=${port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=${dir} -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200 -c shared_buffers=32MB`;
  const start = () => run("pg_ctl", ["-D", data, "-l", join(dir, "server.log"), "-w", "-t", "60", "-o", options, "start"]);
  start();
  const adminUrl = `postgres://${user}@127.0.0.1:${port}/postgres`;
  const created = [];
  return {
    adminUrl,
    /** The server's data directory (its postmaster.pid names the server's process). */
    dataDir: data,
    async createDatabase(name) {
      const db = name ?? `svc_test_${process.pid}_${++databaseCounter}`;
      const client = new pg.Client({ connectionString: adminUrl });
      await client.connect();
      try {
        await client.query(`CREATE DATABASE ${db}`);
      } finally {
        await client.end();
      }
      created.push(db);
      return `postgres://${user}@127.0.0.1:${port}/${db}`;
    },
    kill() {
      run("pg_ctl", ["-D", data, "-m", "immediate", "-w", "stop"]);
    },
    start,
    async stop() {
      try {
        // Already stopped (a test killed it): nothing to stop, only the directory to remove.
        if (existsSync(join(data, "postmaster.pid"))) run("pg_ctl", ["-D", data, "-m", "fast", "-w", "stop"]);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}
function outsideServer(adminUrl) {
  const created = [];
  const admin = async (sql) => {
    const client = new pg.Client({ connectionString: adminUrl });
    await client.connect();
    try {
      await client.query(sql);
    } finally {
      await client.end();
    }
  };
  return {
    adminUrl,
    async createDatabase(name) {
      const db = name ?? `svc_test_${process.pid}_${++databaseCounter}`;
      await admin(`CREATE DATABASE ${db}`);
      created.push(db);
      const url = new URL(adminUrl);
      url.pathname = `/${db}`;
      return url.toString();
    },
    kill() {
      throw new Error("an outside PostgreSQL server (SVC_TEST_POSTGRES_URL) cannot be killed by the tests");
    },
    start() {},
    async stop() {
      for (const db of created) await admin(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`);
    },
  };
}
export { postgresUnavailable, startPostgres };
