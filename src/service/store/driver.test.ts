import { existsSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { openDatabase, sqliteDriverPath } from "./driver.js";

const major = Number(process.versions.node.split(".")[0]);
const root = join(import.meta.dirname, "..", "..", "..");

describe("the SQLite driver", () => {
  it("is better-sqlite3 13 on Node >= 22 when installed, 12 on Node 20", () => {
    const has13 = existsSync(join(root, "node_modules", "better-sqlite3-13", "package.json"));
    if (major >= 22 && has13) expect(sqliteDriverPath()).toContain(`${join("node_modules", "better-sqlite3-13")}`);
    else expect(sqliteDriverPath()).toContain(`${join("node_modules", "better-sqlite3")}${"/"}`);
  });

  it("opens a file and survives statements being dropped and collected", () => {
    const db = openDatabase(":memory:");
    // Many short-lived statements: with better-sqlite3 12 built for Node 24.19+, collecting them aborted the process.
    for (let i = 0; i < 2000; i++) expect(db.prepare("SELECT ? AS x").get(i)).toEqual({ x: i });
    db.close();
  });
});
