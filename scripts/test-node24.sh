#!/usr/bin/env bash
# Runs the whole test suite again on Node 24 (a live LTS line), next to the machine's Node.
# The official Node 24 binary comes from the npm registry's node-linux-<arch> package, which also
# ships Node's headers, so better-sqlite3 is rebuilt against it; afterwards it is rebuilt for the
# machine's Node again, so the working tree is left as it was.
set -euo pipefail
cd "$(dirname "$0")/.."

case "$(uname -m)" in
  x86_64) arch=x64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) echo "test-node24: no official Node 24 build for $(uname -m); skipping is not allowed, so failing" >&2; exit 1 ;;
esac
home="var/node24"
node24="$home/node_modules/node-linux-$arch"
if [ ! -x "$node24/bin/node" ]; then
  echo "test-node24: installing node-linux-$arch@24 from the npm registry into $home" >&2
  mkdir -p "$home"
  npm install --prefix "$home" --no-save --no-package-lock --no-audit --no-fund "node-linux-$arch@24" >/dev/null
fi
node24="$(cd "$node24" && pwd)"

trap 'echo "test-node24: rebuilding better-sqlite3 for $(node --version) again" >&2; npm rebuild better-sqlite3 >/dev/null' EXIT

echo "test-node24: rebuilding better-sqlite3 for Node $("$node24/bin/node" --version)" >&2
PATH="$node24/bin:$PATH" npm_config_nodedir="$node24" npm rebuild better-sqlite3 >/dev/null
PATH="$node24/bin:$PATH" node scripts/run-tests.mjs
