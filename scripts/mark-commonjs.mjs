// After `tsc -p tsconfig.build.json`: the build in dist/ is CommonJS (.js), though this package is "type": "module"
// for its sources, tests and scripts; dist/package.json says so to Node and TypeScript. dist/esm/*.mjs stay ES
// modules by their extension.
import { writeFileSync } from 'node:fs';

writeFileSync(new URL('../dist/package.json', import.meta.url), '{ "type": "commonjs" }\n');
