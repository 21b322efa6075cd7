#!/bin/sh
# Everything the tests need, then all of them: dependencies, redis-server (Debian), types, lint, tests.
set -e
cd "$(dirname "$0")/.."
npm ci --no-audit --no-fund
if ! command -v redis-server >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server) >/dev/null
  else
    echo "redis-server is missing: install Debian's redis-server package" >&2
    exit 1
  fi
fi
npm run check
