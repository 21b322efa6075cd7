#!/bin/sh
# Everything the tests need, then all of them: dependencies, redis-server and chromium (Debian), types, lint,
# tests.
set -e
cd "$(dirname "$0")/.."
npm ci --no-audit --no-fund
# Nest 10 for test/nestjs/nest10.test.ts, beside the project's Nest 11 (it skips without it, except in CI).
npm ci --no-audit --no-fund --prefer-offline --prefix test/nestjs/fixtures/nest10
# A NestJS project's Jest 29 and 30 tests, Vitest, require() and import against the packed package, for
# test/package/nest-jest.test.ts (it skips without it, except in CI). --prefer-offline: npm's cache first.
npm ci --no-audit --no-fund --prefer-offline --prefix test/package/fixtures/nest-jest
if ! command -v redis-server >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server) >/dev/null
  else
    echo "redis-server is missing: install Debian's redis-server package" >&2
    exit 1
  fi
fi
# Headless Chromium checks the HTML report of `floodgate tour --html` (test/cli/html-report.test.ts).
if [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null
  else
    # The test skips without it, except in CI (CI=1), where it fails.
    echo "chromium is missing (install Debian's chromium package): the HTML report test will skip" >&2
  fi
fi
npm run check
