// Which environment variables configuration may give a worker. Env comes from places that do not choose code
// (templates, endpoint settings, secrets, a manifest's `env`), but some variables make a program load code
// other than the deployed build before it runs: a dynamic loader's preload list, Node's `--require`/`--import`
// through NODE_OPTIONS, an interpreter's startup file. Under a sandbox they also reach the launcher, which runs
// before the sandbox is in force. Such variables are refused wherever env is set; SVC_ names are the worker
// protocol's, set by the service alone. Pure.

/** Variables refused by name (compared without regard to case: some platforms read them so). */
const LOADER_VARIABLES: ReadonlySet<string> = new Set([
  // Node
  "NODE_OPTIONS",
  "NODE_PATH",
  "NODE_REPL_EXTERNAL_MODULE",
  "NODE_COMPILE_CACHE",
  "NODE_ICU_DATA",
  // Python
  "PYTHONPATH",
  "PYTHONSTARTUP",
  "PYTHONHOME",
  "PYTHONUSERBASE",
  "PYTHONEXECUTABLE",
  // Perl, Ruby, PHP, Java, Lua
  "PERL5LIB",
  "PERLLIB",
  "PERL5OPT",
  "PERL5DB",
  "RUBYOPT",
  "RUBYLIB",
  "PHPRC",
  "PHP_INI_SCAN_DIR",
  "JAVA_TOOL_OPTIONS",
  "_JAVA_OPTIONS",
  "JDK_JAVA_OPTIONS",
  "CLASSPATH",
  "LUA_PATH",
  "LUA_CPATH",
  // Shells: startup files and code run at each prompt or trace line
  "BASH_ENV",
  "ENV",
  "SHELLOPTS",
  "BASHOPTS",
  "PS4",
  "PROMPT_COMMAND",
  // The C library and OpenSSL: modules and engines loaded from a path
  "GCONV_PATH",
  "GLIBC_TUNABLES",
  "OPENSSL_CONF",
  "OPENSSL_ENGINES",
  "OPENSSL_MODULES",
]);

/** Variables refused by prefix: every dynamic-loader setting (LD_PRELOAD, LD_LIBRARY_PATH, LD_AUDIT...). */
const LOADER_PREFIXES = ["LD_", "DYLD_", "LUA_INIT", "BASH_FUNC_"] as const;

/**
 * The runtime's own knobs an endpoint may tune (docs/worker-protocol.md): numbers the runtime reads after it has
 * loaded, which decide nothing about what code runs or whom the worker talks to.
 */
const WORKER_TUNABLES = new Set(["SVC_STOP_GRACE_MS", "SVC_ORPHAN_EXIT_MS", "SVC_FULL_STACKS"]);

/** Why `name` may not be set by configuration ("may not be set: ..."), or undefined when it may. */
export function reservedEnvName(name: string): string | undefined {
  const upper = name.toUpperCase();
  if (WORKER_TUNABLES.has(name)) return undefined;
  if (upper.startsWith("SVC_")) return "may not be set: SVC_ variables belong to the worker protocol and are set by the service";
  if (LOADER_VARIABLES.has(upper) || LOADER_PREFIXES.some((p) => upper.startsWith(p))) {
    return "may not be set: it is a loader variable, which makes a program load code other than the deployed build";
  }
  return undefined;
}

/** One `<at><name>: <why>` line per refused name; empty when all may be set. */
export function reservedEnvProblems(names: Iterable<string>, at: string): string[] {
  const problems: string[] = [];
  for (const name of names) {
    const why = reservedEnvName(name);
    if (why) problems.push(`${at}${name}: ${why}`);
  }
  return problems;
}
