#!/usr/bin/env node
// Thin launcher: the CLI lives in the compiled library (dist/), built by `npm install` (prepare).
import { main } from "../dist/cli/main.js";

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err) => {
    // main() handles every error itself; reaching here is a bug in svc.
    console.error(err);
    process.exit(70);
  },
);
