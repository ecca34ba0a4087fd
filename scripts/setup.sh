#!/usr/bin/env bash
# Installs what h2h-sync needs beyond `npm ci`: a redis-server binary (never started here:
# tests and the demo start private instances) and a loadable better-sqlite3 build.
set -euo pipefail
cd "$(dirname "$0")/.."

find_redis() {
  command -v redis-server 2>/dev/null || { [ -x /usr/bin/redis-server ] && echo /usr/bin/redis-server; } || true
}

if [ -z "$(find_redis)" ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "setup: redis-server not found; installing it with apt-get" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # A policy-rc.d that answers 101 stops Debian's maintainer scripts from starting a
    # system-wide Redis: the project only ever uses the private instances it starts itself.
    if [ ! -e /usr/sbin/policy-rc.d ]; then
      printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
      trap 'rm -f /usr/sbin/policy-rc.d' EXIT
    fi
    apt-get install -y -qq --no-install-recommends redis-server >/dev/null
  elif command -v apt-get >/dev/null 2>&1; then
    echo "setup: redis-server is missing. Fix: sudo apt-get install -y redis-server (or put redis-server >= 6.2 on PATH)" >&2
    exit 1
  else
    echo "setup: redis-server is missing and apt-get is not available. Fix: install Redis >= 6.2 with your package manager so that redis-server is on PATH" >&2
    exit 1
  fi
fi
echo "setup: redis-server: $(find_redis) ($("$(find_redis)" --version | awk '{print $3}'))"

# npm can skip dependency install scripts; make sure the native SQLite binding really loads.
if ! node -e "new (require('better-sqlite3'))(':memory:').close()" 2>/dev/null; then
  echo "setup: better-sqlite3 is not built; building it from source (about a minute)" >&2
  npm rebuild better-sqlite3 --foreground-scripts >/dev/null
  node -e "new (require('better-sqlite3'))(':memory:').close()" || {
    echo "setup: better-sqlite3 still does not load. Fix: install python3, make and g++, then run: npm rebuild better-sqlite3" >&2
    exit 1
  }
fi
echo "setup: better-sqlite3 loads"
