// The examples every command's --help ends with, in one table keyed by the command's path ("volume create").
// Kept together so that they read as one voice and a test (help.test.ts) can require one for every command; a
// command added without examples fails that test. `addExamples` hangs them under each command after registration.

import type { Command } from "commander";

/** One example: the command line, and what it does when that is not obvious from it. */
type Example = readonly [command: string, what?: string];

export const EXAMPLES: Readonly<Record<string, readonly Example[]>> = {
  dev: [["svc dev", "serve this project on 127.0.0.1:8600, rebuilding on every save"], ["svc dev --port 9000 --no-watch"]],
  logs: [["svc logs hello --follow"], ["svc logs hello --since 10m --job 3f2a9c1e"]],
  build: [["svc build", "bundle the project into .svc/ and print what it serves"], ["svc build --json --exclude sharp"]],
  init: [["svc init my-app", "the starter template"], ["svc init my-llm --template textgen"]],
  server: [["svc server", "a service on 127.0.0.1:8600 with process workers"], ["svc server --workers docker --data-dir /var/lib/svc --host 0.0.0.0"]],
  images: [["svc images build --gpu"], ["svc images list"]],
  "images build": [["svc images build", "both worker images"], ["svc images build --server --registry registry.local:5000"]],
  "images list": [["svc images list --json"]],
  "images prune": [["svc images prune"], ["svc images prune --all", "also unused images of this version"]],
  models: [["svc models fetch --cache /var/lib/svc-models openai-community/gpt2@main"]],
  "models fetch": [
    ["svc models fetch --cache ./hf openai-community/gpt2", "the main branch, into ./hf (HF_HOME) in huggingface_hub's layout"],
    ["svc models fetch --cache /svc-models --hub https://hf-mirror.internal --json org/name@v1.2"],
  ],
  volume: [["svc volume create --name weights --size 50"], ["svc volume cp ./model.bin weights:/models/"]],
  "volume create": [["svc volume create --name weights --size 50"], ["svc volume create --name scratch --size 10 --data-center local"]],
  "volume list": [["svc volume list --json"]],
  "volume get": [["svc volume get vol3f2a9c1e7b"]],
  "volume update": [["svc volume update vol3f2a9c1e7b --size 100"]],
  "volume delete": [["svc volume delete vol3f2a9c1e7b --yes"]],
  "volume keys": [["svc volume keys create --read-only --volume vol3f2a9c1e7b"]],
  "volume keys create": [["svc volume keys create --name ci --volume vol3f2a9c1e7b"], ["svc volume keys create --read-only"]],
  "volume keys list": [["svc volume keys list"]],
  "volume keys revoke": [["svc volume keys revoke SVCAK3F2A9C1E --yes"]],
  "volume cp": [["svc volume cp ./model.bin weights:/models/"], ["svc volume cp -r weights:/models ./models", "download a folder"]],
  "volume ls": [["svc volume ls weights:/models"], ["svc volume ls -r weights:/"]],
  "volume rm": [["svc volume rm weights:/models/old.bin"], ["svc volume rm -r weights:/tmp --yes"]],
  endpoint: [["svc endpoint create --name whisper --template tpl3f2a9c1e --gpu AMPERE_24"], ["svc endpoint list"]],
  "endpoint create": [["svc endpoint create --name whisper --template tpl3f2a9c1e --gpu AMPERE_24 --workers-max 3"]],
  "endpoint list": [["svc endpoint list --json"]],
  "endpoint get": [["svc endpoint get 3f2a9c1e7b6d5a4c"]],
  "endpoint update": [["svc endpoint update 3f2a9c1e7b6d5a4c --workers-min 1 --idle-timeout 5m"]],
  "endpoint webhook": [["svc endpoint webhook set 3f2a9c1e7b6d5a4c --events completed,failed"]],
  "endpoint webhook show": [["svc endpoint webhook show 3f2a9c1e7b6d5a4c"]],
  "endpoint webhook set": [
    ["svc endpoint webhook set 3f2a9c1e7b6d5a4c --events completed,failed,progress"],
    ["svc endpoint webhook set 3f2a9c1e7b6d5a4c --events default"],
  ],
  "endpoint webhook rotate-secret": [["svc endpoint webhook rotate-secret 3f2a9c1e7b6d5a4c --keep-previous 3600"]],
  "endpoint delete": [["svc endpoint delete 3f2a9c1e7b6d5a4c --yes"]],
  template: [["svc template create --name whisper --image ghcr.io/acme/whisper:1"], ["svc template list"]],
  "template create": [["svc template create --name whisper --image ghcr.io/acme/whisper:1 --env MODEL=large-v3"]],
  "template list": [["svc template list --json"]],
  keys: [["svc keys create --scope jobs:* --name ci"], ["svc keys list"]],
  "keys create": [["svc keys create --scope deploy --name ci --expires-in 30d"], ["svc keys create --scope jobs:3f2a9c1e7b6d5a4c"]],
  "keys list": [["svc keys list --json"]],
  "keys revoke": [["svc keys revoke key3f2a9c1e --yes"]],
  deploy: [["svc deploy --env prod"], ["svc deploy --dry-run", "show what would change"], ["svc deploy --preview", "run the app in local containers"]],
  undeploy: [["svc undeploy hello --env staging"], ["svc undeploy --all --env staging --yes"]],
  rollback: [["svc rollback --env prod", "back to the build before the current one"], ["svc rollback --env prod --to b3f2a9c1"]],
  update: [["svc update --env prod --dry-run"], ["svc update --env prod"]],
  app: [["svc app list"], ["svc app get my-app"]],
  "app list": [["svc app list --json"]],
  "app get": [["svc app get", "this project's app"], ["svc app get my-app --json"]],
  "app delete": [["svc app delete my-app --yes"]],
  env: [["svc env list"], ["svc env create staging"]],
  "env list": [["svc env list --app my-app"]],
  "env get": [["svc env get prod"]],
  "env create": [["svc env create staging"]],
  "env delete": [["svc env delete staging --yes"]],
  login: [
    ["svc login --url https://svc.example.com", "asks for the API key"],
    ["svc login --profile staging --url https://staging.example.com", "a second stored target"],
  ],
  logout: [["svc logout"]],
  whoami: [["svc whoami"], ["svc whoami --json"]],
  run: [['svc run hello \'{"name":"Ada"}\''], ["svc run hello @input.json --timeout 5m"], ['echo \'{"prompt":"hi"}\' | svc run chat - --async']],
  jobs: [["svc jobs list hello"], ["svc jobs status hello 3f2a9c1e"]],
  "jobs list": [["svc jobs list hello --limit 50"]],
  "jobs status": [["svc jobs status hello 3f2a9c1e --json"]],
  "jobs cancel": [["svc jobs cancel hello 3f2a9c1e"]],
  "jobs retry": [["svc jobs retry hello 3f2a9c1e"]],
  usage: [["svc usage", "the last 24 hours, per endpoint and hour"], ["svc usage --from 2026-11-01 --to 2026-11-02 --json"]],
  doctor: [["svc doctor"], ["svc doctor --dev", "also what working on svc itself needs (Chromium, PostgreSQL)"]],
  completion: [['eval "$(svc completion bash)"', "in ~/.bashrc"], ["svc completion fish > ~/.config/fish/completions/svc.fish"]],
  secret: [["svc secret set HF_TOKEN"], ["svc secret list"]],
  "secret set": [["svc secret set HF_TOKEN", "asks for the value"], ['printf %s "$TOKEN" | svc secret set HF_TOKEN --env prod']],
  "secret list": [["svc secret list --json"]],
  "secret delete": [["svc secret delete HF_TOKEN --yes"]],
  "registry-auth": [["svc registry-auth create --name ghcr --username acme"], ["svc registry-auth list"]],
  "registry-auth create": [
    ["svc registry-auth create --name ghcr --username acme", "asks for the password"],
    ['printf %s "$GHCR_TOKEN" | svc registry-auth create --name ghcr --username acme --json'],
  ],
  "registry-auth list": [["svc registry-auth list --json"]],
  "registry-auth delete": [["svc registry-auth delete cra1a2b3c4d5e6f --yes"]],
};

/** The "Examples:" block of a command's help. Pure. */
export function examplesText(examples: readonly Example[]): string {
  const width = Math.max(...examples.map(([command]) => command.length));
  return `\nExamples:\n${examples.map(([command, what]) => `  $ ${what ? `${command.padEnd(width)}  # ${what}` : command}`.trimEnd()).join("\n")}\n`;
}

/** Hang each command's examples under its help, the whole tree down. */
export function addExamples(cmd: Command, prefix: string[] = []): void {
  for (const sub of cmd.commands) {
    const path = [...prefix, sub.name()];
    const examples = EXAMPLES[path.join(" ")];
    if (examples && examples.length > 0) sub.addHelpText("after", examplesText(examples));
    addExamples(sub, path);
  }
}
