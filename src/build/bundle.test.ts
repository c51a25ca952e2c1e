import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { UserError } from "../errors.js";
import { blamedEndpoints, bundleEndpoint, bundleEndpoints, bundleHint, codeFrame, problemOf, svcSdkEntry } from "./bundle.js";

const root = mkdtempSync(join(tmpdir(), "svc-bundle-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function write(path: string, contents: string): void {
  mkdirSync(join(root, path, ".."), { recursive: true });
  writeFileSync(join(root, path), contents);
}

write("node_modules/plainpkg/package.json", JSON.stringify({ name: "plainpkg", version: "1.0.0", main: "index.js" }));
write("node_modules/plainpkg/index.js", "exports.shout = (s) => s.toUpperCase() + require('node:os').EOL.trim();");
write("node_modules/nativepkg/package.json", JSON.stringify({ name: "nativepkg", version: "4.5.6", main: "index.js", gypfile: true }));
write("node_modules/nativepkg/index.js", "exports.native = () => 'from nativepkg';");
write(
  "src/fn.ts",
  `
import { Endpoint } from "svc";
import { shout } from "plainpkg";
import { native } from "nativepkg";
export const hello = Endpoint({ name: "hello" })(async function hello(input: { who: string }) {
  return { text: shout("hi " + input.who), native: native() };
});
`,
);
write(
  "entry.ts",
  `
import * as m0 from "./src/fn.ts";
import { __defineHandler } from "svc";
export default __defineHandler({ endpoint: "hello", kind: "queue", functions: [{ name: "hello", kind: "function", ref: m0["hello"] }] });
`,
);

describe("bundleEndpoint", () => {
  it("bundles plain packages and the SDK, keeps natives and declared dependencies external", async () => {
    const outfile = join(root, "out/handler.mjs");
    const result = await bundleEndpoint(root, { endpoint: "hello", entry: join(root, "entry.ts"), outfile, external: ["declared-dep"] });
    expect(result.natives).toEqual([{ name: "nativepkg", version: "4.5.6", reason: expect.stringContaining("binding.gyp") }]);
    // dotenv: the SDK reads a project's .env with it (bundled with the SDK).
    expect(result.importedPackages).toEqual(["dotenv", "nativepkg", "plainpkg"]);
    const code = readFileSync(outfile, "utf8");
    expect(code.startsWith('import { createRequire as __svcCreateRequire } from "node:module";')).toBe(true);
    expect(code).toContain('from "nativepkg"');
    expect(code).not.toContain('from "plainpkg"');
    expect(code).toContain("__defineHandler");
    expect(readFileSync(`${outfile}.map`, "utf8")).toContain("src/fn.ts");

    // The bundle runs in a plain node process; nativepkg resolves from the project's node_modules.
    const output = execFileSync(
      process.execPath,
      [
        "--input-type=module",
        "-e",
        `
      const { default: handler } = await import(${JSON.stringify(outfile)});
      await handler.init();
      const r = handler.invoke("hello", { who: "bob" }, { jobId: "j", signal: new AbortController().signal });
      console.log(JSON.stringify(await r.value));
    `,
      ],
      { encoding: "utf8" },
    );
    expect(JSON.parse(output)).toEqual({ text: "HI BOB", native: "from nativepkg" });
  });

  it("bundles several endpoints at once, each with its own externals and natives", async () => {
    write("src/a.ts", 'import { shout } from "plainpkg";\nexport const a = () => shout("a");\n');
    write("src/b.ts", 'import { shout } from "plainpkg";\nimport { native } from "nativepkg";\nexport const b = () => shout(native());\n');
    write("entry-a.ts", 'export * from "./src/a.ts";\n');
    write("entry-b.ts", 'export * from "./src/b.ts";\n');
    const [a, b] = await bundleEndpoints(root, [
      // "a" declares plainpkg (installed beside it); "b" does not, so b must bundle it.
      { endpoint: "a", entry: join(root, "entry-a.ts"), outfile: join(root, "multi/endpoints/a/handler.mjs"), external: ["plainpkg"] },
      { endpoint: "b", entry: join(root, "entry-b.ts"), outfile: join(root, "multi/endpoints/b/handler.mjs"), external: [] },
    ]);
    expect(a!.natives).toEqual([]);
    expect(b!.natives.map((n) => n.name)).toEqual(["nativepkg"]);
    expect(a!.importedPackages).toEqual(["plainpkg"]);
    expect(b!.importedPackages).toEqual(["nativepkg", "plainpkg"]);
    expect(readFileSync(join(root, "multi/endpoints/a/handler.mjs"), "utf8")).toContain('from "plainpkg"');
    const bCode = readFileSync(join(root, "multi/endpoints/b/handler.mjs"), "utf8");
    expect(bCode).not.toContain('from "plainpkg"');
    expect(bCode).toContain("toUpperCase");
    expect(bCode).toContain('from "nativepkg"');
  });

  it("reports unresolvable imports with file:line", async () => {
    write("src/broken.ts", 'import { x } from "no-such-package-anywhere";\nexport const y = x;\n');
    write("broken-entry.ts", 'import * as m0 from "./src/broken.ts";\nexport default m0;\n');
    const error = await bundleEndpoint(root, { endpoint: "b", entry: join(root, "broken-entry.ts"), outfile: join(root, "out/b.mjs"), external: [] }).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(UserError);
    expect((error as UserError).problems.join("\n")).toMatch(/src\/broken\.ts:1:\d+: Could not resolve "no-such-package-anywhere"/);
  });

  it("refuses binaries imported from the project's own files", async () => {
    write("src/bin.ts", 'import x from "./addon.node";\nexport default x;\n');
    write("src/addon.node", "");
    const error = await bundleEndpoint(root, { endpoint: "n", entry: join(root, "src/bin.ts"), outfile: join(root, "out/n.mjs"), external: [] }).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(UserError);
    expect((error as UserError).problems.join("\n")).toMatch(/imports the binary \.\/addon\.node/);
  });

  it("blames the endpoints defined in the failing files, or all when the failure is elsewhere", () => {
    const requests = [
      { endpoint: "a", definedIn: ["src/a.ts"] },
      { endpoint: "b", definedIn: ["src/b.ts", "src/b-more.ts"] },
    ];
    const at = (file: string) => ({ text: "x", location: { file: `${root}/${file}` } }) as never;
    expect(blamedEndpoints(requests, [at("src/b-more.ts")], root).map((r) => r.endpoint)).toEqual(["b"]);
    expect(blamedEndpoints(requests, [at("src/a.ts"), at("src/b.ts")], root).map((r) => r.endpoint)).toEqual(["a", "b"]);
    // A shared module: any endpoint may import it.
    expect(blamedEndpoints(requests, [at("src/a.ts"), at("src/shared.ts")], root).map((r) => r.endpoint)).toEqual(["a", "b"]);
    expect(blamedEndpoints(requests, [{ text: "no location" } as never], root).map((r) => r.endpoint)).toEqual(["a", "b"]);
  });

  it("hints at imports for resolution failures and at the code (no type-check) for the rest", () => {
    expect(bundleHint([{ text: 'Could not resolve "x"' }])).toMatch(/^Fix the imports above/);
    expect(bundleHint([{ text: 'Expected "}" but found ";"' }])).toMatch(/^Fix the code at the places above .*does not type-check/);
    expect(bundleHint([{ text: 'Expected "}"' }, { text: 'Could not resolve "x"' }])).toMatch(/code .* imports/);
  });

  it('hints only at what svc lets the user do (no "mark as external")', () => {
    const hint = bundleHint([{ text: 'Could not resolve "x"' }]);
    expect(hint).toContain("npm install <package>");
    expect(hint).toContain("`dependencies`");
    expect(hint).not.toMatch(/external/);
  });

  it("shows esbuild's code frame: the source line and a caret under the span", () => {
    expect(codeFrame({ line: 12, column: 14, length: 10, lineText: 'import x from "not-here";' })).toEqual([
      '12 | import x from "not-here";',
      "   |               ^^^^^^^^^^",
    ]);
    // Columns are UTF-8 bytes: the caret still sits under the span after non-ASCII text; tabs stay tabs.
    expect(codeFrame({ line: 3, column: 12, length: 1, lineText: "\tconst é = ;" })).toEqual(["3 | \tconst é = ;", `  | \t${" ".repeat(10)}^`]);
    expect(codeFrame({ line: 1, column: 0, length: 0, lineText: "" })).toEqual([]);
  });

  it('renders a problem with its place, its code frame, and without esbuild\'s "mark as external" note', () => {
    const message = {
      text: 'Could not resolve "not-here"',
      location: { file: `${root}/src/fn.ts`, line: 2, column: 14, length: 10, lineText: 'import x from "not-here";', namespace: "", suggestion: "" },
      notes: [
        {
          text: 'You can mark the path "not-here" as external to exclude it from the bundle, which will remove this error and leave the unresolved path in the bundle.',
          location: null,
        },
      ],
    };
    expect(problemOf(message, root)).toBe(
      ['src/fn.ts:2:15: Could not resolve "not-here"', '    2 | import x from "not-here";', "      |               ^^^^^^^^^^"].join("\n"),
    );
    const other = { ...message, notes: [{ text: "Did you mean ./b.ts?", location: null }] };
    expect(problemOf(other, root).split("\n")[0]).toBe('src/fn.ts:2:15: Could not resolve "not-here" (Did you mean ./b.ts?)');
  });
});

describe('the SDK "svc" in bundles', () => {
  const cliSdk = realpathSync(join(fileURLToPath(new URL("../..", import.meta.url)), "packages", "svc", "dist", "index.js"));

  it("is svc-cli's own dependency when the project has none installed", () => {
    const bare = mkdtempSync(join(tmpdir(), "svc-bundle-bare-"));
    try {
      expect(realpathSync(svcSdkEntry(bare))).toBe(cliSdk);
    } finally {
      rmSync(bare, { recursive: true, force: true });
    }
  });

  it("is the project's installed svc when it has one: the version its package.json asks for", async () => {
    const project = mkdtempSync(join(tmpdir(), "svc-bundle-own-"));
    try {
      const file = (path: string, contents: string) => {
        mkdirSync(join(project, path, ".."), { recursive: true });
        writeFileSync(join(project, path), contents);
      };
      file(
        "node_modules/svc/package.json",
        JSON.stringify({ name: "svc", version: "9.9.9", type: "module", exports: { ".": { types: "./lib/main.d.ts", default: "./lib/main.js" } } }),
      );
      file("node_modules/svc/lib/main.js", 'export const sdkVersion = "project-sdk-9.9.9";\n');
      file("entry.ts", 'import { sdkVersion } from "svc";\nexport default sdkVersion;\n');
      expect(svcSdkEntry(project)).toBe(join(project, "node_modules/svc/lib/main.js"));
      const outfile = join(project, "out/handler.mjs");
      await bundleEndpoint(project, { endpoint: "own", entry: join(project, "entry.ts"), outfile, external: [] });
      expect(readFileSync(outfile, "utf8")).toContain("project-sdk-9.9.9");
    } finally {
      rmSync(project, { recursive: true, force: true });
    }
  });
});
