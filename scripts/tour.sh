#!/bin/sh
# The main job: install what is missing, build, and run the tour on the in-memory store.
set -e
cd "$(dirname "$0")/.."
[ -d node_modules ] || npm ci --no-audit --no-fund
npm run --silent build
exec node dist/cli/main.js tour "$@"
