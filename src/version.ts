import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

// Read once from the package's own package.json (dist/version.js -> ../package.json).
export const SVC_VERSION: string = (JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string }).version;

/** The svc package root (where package.json, templates/ and dist/ live). */
export const SVC_PACKAGE_ROOT = fileURLToPath(new URL("..", import.meta.url));
