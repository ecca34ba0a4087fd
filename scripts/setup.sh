#!/usr/bin/env bash
# Installs what h2h-sync needs beyond `npm ci`: a redis-server binary and the PostgreSQL server
# binaries (initdb, postgres), never started here: tests and the demo start private instances;
# a loadable better-sqlite3 build; and with --tests (`npm test`) php-cli and python3, for the
# test of docs/shop.md's verification snippets, promtool (Debian's prometheus package), for
# the test of the alerting rules in deploy/prometheus/, and openssl, for the TLS Redis test's
# certificates: a production host needs none of them.
set -euo pipefail
cd "$(dirname "$0")/.."
FOR_TESTS=
if [ "${1:-}" = --tests ]; then FOR_TESTS=1; fi

find_redis() {
  command -v redis-server 2>/dev/null || { [ -x /usr/bin/redis-server ] && echo /usr/bin/redis-server; } || true
}

# Files this script adds for the length of an install only; removed when it ends.
TEMPORARY_FILES=()
trap 'rm -f ${TEMPORARY_FILES[@]+"${TEMPORARY_FILES[@]}"}' EXIT  # empty-array safe under set -u on bash < 4.4

# A policy-rc.d that answers 101 stops Debian's maintainer scripts from starting a system-wide
# server (Redis, or a PostgreSQL cluster): the project only ever uses the private instances it
# starts itself.
block_service_starts() {
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
    TEMPORARY_FILES+=(/usr/sbin/policy-rc.d)
  fi
}

APT_UPDATED=
apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  if [ -z "$APT_UPDATED" ]; then apt-get update -qq; APT_UPDATED=1; fi
  block_service_starts
  apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

if [ -z "$(find_redis)" ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "setup: redis-server not found; installing it with apt-get" >&2
    apt_install redis-server
  elif command -v apt-get >/dev/null 2>&1; then
    echo "setup: redis-server is missing. Fix: sudo apt-get install -y redis-server (or put redis-server >= 6.2 on PATH)" >&2
    exit 1
  else
    echo "setup: redis-server is missing and apt-get is not available. Fix: install Redis >= 6.2 with your package manager so that redis-server is on PATH" >&2
    exit 1
  fi
fi
echo "setup: redis-server: $(find_redis) ($("$(find_redis)" --version | awk '{print $3}'))"

# The directory holding initdb and postgres, found as src/dev/postgres-server.ts finds it: the
# first PATH directory with both, else the newest /usr/lib/postgresql/<version>/bin (Debian keeps
# them off PATH).
find_postgres_bin() {
  local dir
  local IFS=:
  for dir in $PATH; do
    if [ -n "$dir" ] && [ -x "$dir/initdb" ] && [ -x "$dir/postgres" ]; then echo "$dir"; return; fi
  done
  for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k5,5 -rn); do
    if [ -x "$dir/initdb" ] && [ -x "$dir/postgres" ]; then echo "$dir"; return; fi
  done
}

if [ -z "$(find_postgres_bin)" ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "setup: PostgreSQL server (initdb, postgres) not found; installing Debian's postgresql package with apt-get" >&2
    # Nor should postgresql-common create the system cluster `main` (pg_createcluster reads
    # createcluster.d): the tests run initdb in their own temporary directories.
    mkdir -p /etc/postgresql-common/createcluster.d
    if [ ! -e /etc/postgresql-common/createcluster.d/h2h-sync.conf ]; then
      echo 'create_main_cluster = false' > /etc/postgresql-common/createcluster.d/h2h-sync.conf
      TEMPORARY_FILES+=(/etc/postgresql-common/createcluster.d/h2h-sync.conf)
    fi
    apt_install postgresql
  elif command -v apt-get >/dev/null 2>&1; then
    echo "setup: the PostgreSQL server is missing. Fix: sudo apt-get install -y postgresql (or put a directory with initdb and postgres on PATH)" >&2
    exit 1
  else
    echo "setup: the PostgreSQL server is missing and apt-get is not available. Fix: install PostgreSQL >= 13 so that initdb and postgres are on PATH" >&2
    exit 1
  fi
  if [ -z "$(find_postgres_bin)" ]; then
    echo "setup: installed postgresql, but found no initdb and postgres under /usr/lib/postgresql/*/bin or on PATH" >&2
    exit 1
  fi
fi
echo "setup: postgres: $(find_postgres_bin)/postgres ($("$(find_postgres_bin)/postgres" --version | awk '{print $3}'))"

# The interpreters of docs/shop.md's verification snippets, which its test runs
# (test/docs/shop-snippets.test.ts): Debian's package for a command that is missing.
install_missing_command() {
  local command=$1 package=$2 wanted=$3
  command -v "$command" >/dev/null 2>&1 && return
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "setup: $command not found; installing Debian's $package package with apt-get" >&2
    apt_install "$package"
  elif command -v apt-get >/dev/null 2>&1; then
    echo "setup: $command is missing. Fix: sudo apt-get install -y $package (or put $wanted on PATH)" >&2
    exit 1
  else
    echo "setup: $command is missing and apt-get is not available. Fix: install $wanted so that $command is on PATH" >&2
    exit 1
  fi
}
if [ -n "$FOR_TESTS" ]; then
  install_missing_command php php-cli 'PHP >= 8.0'
  echo "setup: php: $(command -v php) ($(php -r 'echo PHP_VERSION;'))"
  install_missing_command python3 python3 'Python >= 3.8'
  echo "setup: python3: $(command -v python3) ($(python3 -c 'import platform; print(platform.python_version())'))"
  install_missing_command promtool prometheus 'promtool (Prometheus >= 2.30)'
  echo "setup: promtool: $(command -v promtool) ($(promtool --version 2>&1 | awk 'NR==1{print $3}'))"
  # The TLS Redis test makes its CA and certificate with it (test/helpers/tls.ts).
  install_missing_command openssl openssl 'OpenSSL'
  echo "setup: openssl: $(command -v openssl) ($(openssl version | awk '{print $2}'))"
fi

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
