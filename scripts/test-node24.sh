#!/usr/bin/env bash
# Runs the files that prove what differs between Node lines again on Node 24 (a live LTS line),
# next to the machine's Node, which runs the whole suite (`npm test`): the SQLite addon built for
# Node 24's ABI (store, worker, feed and outbox on SQLite), PostgreSQL's driver, the HTTP client
# and servers (undici, Fastify), child processes and signals (the CLI, the receiver process, a
# crash), and the test runner's own behaviour. `bash scripts/test-node24.sh --all` runs every file.
# The official Node 24 binary comes from the npm registry's node-linux-<arch> package, which also
# ships Node's headers. better-sqlite3 12 is rebuilt against the headers of Node 24.18.1, not of
# the newest 24: Node 24.19 changed node::ObjectWrap so that an addon compiled against its headers
# aborts in Statement::~Statement during GC (nodejs/node#65446); compiled against 24.18.1 headers
# it runs cleanly on every 24.x (docs/deployment.md). It is built from the package's tarball (the
# version package-lock.json pins, checked against its integrity) under var/, kept for the next
# run; the machine's build in node_modules/ is swapped out for the run and put back.
# `bash scripts/test-node24.sh --build-only` only installs Node 24 and builds the addon: .ci/run
# does that in the background while `npm ci` builds the machine's addon.
set -euo pipefail
cd "$(dirname "$0")/.."

case "$(uname -m)" in
  x86_64) arch=x64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) echo "test-node24: no official Node 24 build for $(uname -m)" >&2; exit 1 ;;
esac
HEADERS_VERSION=24.18.1

install_node() { # $1: folder under var/, $2: version spec
  local home="var/$1"
  if [ ! -x "$home/node_modules/node-linux-$arch/bin/node" ]; then
    echo "test-node24: installing node-linux-$arch@$2 from the npm registry into $home" >&2
    mkdir -p "$home"
    npm install --prefix "$home" --no-save --no-package-lock --no-audit --no-fund "node-linux-$arch@$2" >/dev/null
  fi
  (cd "$home/node_modules/node-linux-$arch" && pwd)
}
node24="$(install_node node24 24)"
headers="$(install_node node24-headers "$HEADERS_VERSION")"

# Built from the package's own tarball (the version package-lock.json pins, from the npm
# registry), not from node_modules/: so it can run while `npm ci` builds the machine's addon
# (.ci/run starts both at once, one compile per core) and never touches that build. Kept: the
# next run with the same better-sqlite3 skips the compile.
bs3_version="$(node -p "require('./package-lock.json').packages['node_modules/better-sqlite3'].version")"
node24_addon="var/node24-better-sqlite3/$bs3_version-headers-$HEADERS_VERSION"
if [ ! -f "$node24_addon/build/Release/better_sqlite3.node" ]; then
  echo "test-node24: building better-sqlite3 $bs3_version with Node $HEADERS_VERSION headers" >&2
  rm -rf "$node24_addon"
  mkdir -p "$node24_addon"
  tarball="$(npm pack --silent --pack-destination "$node24_addon" "better-sqlite3@$bs3_version")"
  # The tarball npm ci would install, or nothing: its digest against the lockfile's integrity.
  node -e '
    const [file, pinned] = process.argv.slice(1);
    const got = `sha512-${require("node:crypto").createHash("sha512").update(require("node:fs").readFileSync(file)).digest("base64")}`;
    if (!pinned.split(" ").includes(got)) {
      console.error(`test-node24: ${file} is ${got}, package-lock.json pins ${pinned}`);
      process.exit(1);
    }' "$node24_addon/$tarball" "$(node -p "require('./package-lock.json').packages['node_modules/better-sqlite3'].integrity")"
  tar -xzf "$node24_addon/$tarball" -C "$node24_addon" --strip-components=1
  rm "$node24_addon/$tarball"
  (cd "$node24_addon" && PATH="$node24/bin:$PATH" npm_config_nodedir="$headers" npm run build-release >/dev/null)
fi
if [ "${1:-}" = --build-only ]; then exit 0; fi

# The machine's build of the addon is kept aside and put back afterwards; should it be missing,
# the next `npm test` (scripts/setup.sh) rebuilds it.
addon=node_modules/better-sqlite3/build/Release/better_sqlite3.node
kept="var/better_sqlite3.node.$(node -p process.versions.modules)"
cp "$addon" "$kept"
trap 'echo "test-node24: putting back better-sqlite3 built for $(node --version)" >&2; cp "$kept" "$addon"' EXIT
cp "$node24_addon/build/Release/better_sqlite3.node" "$addon"
echo "test-node24: running on Node $("$node24/bin/node" --version)" >&2
# One file per reason (docs/development.md, "CI").
NODE24_FILES=(
  test/store/apply-order-snapshot.test.ts   # the SQLite addon under load, both backends
  test/store/change-feed.test.ts            # the feed on SQLite and PostgreSQL
  test/store/notify-outbox.test.ts          # the outbox's write transactions
  test/worker/simulator-end-to-end.test.ts  # receiver, queue, worker, store against the simulator
  test/worker/crash-recovery.test.ts        # a worker killed mid-apply, child processes and signals
  test/upstream/client.test.ts              # undici's client: time-outs, retries, keep-alive
  test/notify/outbox-delivery.test.ts       # notifications over real HTTP
  test/api/api.test.ts                      # the shop API (Fastify)
  test/receiver/receiver-server.test.ts     # the receiver process
  test/cli/cli.test.ts                      # the built CLI
)
if [ "${1:-}" = --all ]; then NODE24_FILES=(); fi
PATH="$node24/bin:$PATH" node scripts/run-tests.mjs ${NODE24_FILES[@]+"${NODE24_FILES[@]}"}  # empty-array safe under set -u on bash < 4.4
