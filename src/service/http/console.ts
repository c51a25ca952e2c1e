// The web console's static files (built by scripts/build-console.mjs into dist/console/), served under
// /console/ with no key: the page holds no data; every API call it makes sends the user's key.
// Files are read once and kept in memory (a few hundred KB at most).

import { readFileSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { fileURLToPath } from "node:url";
import { join, normalize } from "node:path";

export const CONSOLE_PATH = "/console/";

// src/service/http/console.ts and dist/service/http/console.js are both three levels below the package root.
const ASSET_DIR = fileURLToPath(new URL("../../../dist/console/", import.meta.url));

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".map": "application/json",
};

// A strict policy: only this origin's scripts, styles and API (no CDN, nothing inline).
const SECURITY_HEADERS = {
  "content-security-policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
};

const cache = new Map<string, Buffer | null>();

function asset(name: string): Buffer | null {
  if (!cache.has(name)) {
    try {
      cache.set(name, readFileSync(join(ASSET_DIR, name)));
    } catch {
      cache.set(name, null);
    }
  }
  return cache.get(name)!;
}

/** Which file a console URL path asks for: the page itself for the app's routes, else a file name. Pure. */
export function consoleFile(pathname: string): string | undefined {
  if (!pathname.startsWith(CONSOLE_PATH)) return undefined;
  const rest = pathname.slice(CONSOLE_PATH.length);
  if (rest === "" || !rest.includes(".")) return "index.html";
  const file = normalize(rest);
  if (file.startsWith("..") || file.includes("/") || file.includes("\\")) return undefined;
  return file;
}

/** Answers GET/HEAD under /console (and a redirect from /). True when answered. */
export function serveConsole(req: IncomingMessage, res: ServerResponse): boolean {
  // Cheap first test: this runs before every request, the job API's hot path included.
  const raw = req.url ?? "/";
  if (raw !== "/" && !raw.startsWith("/console")) return false;
  if (req.method !== "GET" && req.method !== "HEAD") return false;
  const pathname = raw.split("?")[0]!;
  if (pathname === "/" || pathname === "/console") {
    // Only a browser (asking for HTML) is sent to the console from "/"; API clients keep their 401 answers.
    // "/console" needs the slash: the page loads its files relative to it.
    if (pathname === "/" && !String(req.headers.accept ?? "").includes("text/html")) return false;
    req.resume();
    res.writeHead(302, { location: CONSOLE_PATH });
    res.end();
    return true;
  }
  const name = consoleFile(pathname);
  if (name === undefined) return false;
  req.resume();
  const body = asset(name);
  if (!body) {
    const detail = name === "index.html" ? "The console is not built: run `npm run build` (scripts/build-console.mjs)" : `No console file ${name}`;
    res.writeHead(404, { "content-type": "application/problem+json" });
    res.end(JSON.stringify({ title: "Not Found", status: 404, detail }));
    return true;
  }
  const ext = name.slice(name.lastIndexOf("."));
  res.writeHead(200, {
    "content-type": TYPES[ext] ?? "application/octet-stream",
    "content-length": body.length,
    // The page is re-read on every visit; its script and style have a content hash in their names.
    "cache-control": name === "index.html" ? "no-cache" : "public, max-age=31536000, immutable",
    ...SECURITY_HEADERS,
  });
  res.end(req.method === "HEAD" ? undefined : body);
  return true;
}
