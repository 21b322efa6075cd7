/**
 * The HTTP layer knows limiters only by their store contract (`src/limiters/store.ts`): no file under src/http
 * imports src/redis, and the built `floodgate/http` loads with no `redis/` directory at all. The Redis store's
 * own files import each other one way only (no cycle).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const run = promisify(execFile);

function sources(dir: string): string[] {
  return readdirSync(join(root, dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => join(dir, f));
}

/** The relative imports (and re-exports) of a source file, as paths from the repository root. */
function importsOf(file: string): string[] {
  const text = readFileSync(join(root, file), 'utf8');
  return [...text.matchAll(/(?:import|export)[^'"]*?from\s+'(\.[^']+)'/g)].map((m) =>
    normalize(join(dirname(file), m[1])),
  );
}

test('no file under src/http imports src/redis', () => {
  const offenders = sources('src/http').flatMap((file) =>
    importsOf(file)
      .filter((target) => target.startsWith(join('src', 'redis')))
      .map((target) => `${file} → ${target}`),
  );
  assert.deepEqual(offenders, []);
});

test('no import cycle among the Redis store and limiter files', () => {
  const files = [...sources('src/redis'), ...sources('src/limiters')];
  const graph = new Map(files.map((f) => [f, importsOf(f).filter((t) => files.includes(t))]));
  const cycles: string[] = [];
  const state = new Map<string, 'open' | 'done'>();
  const visit = (file: string, path: string[]) => {
    if (state.get(file) === 'done') return;
    if (state.get(file) === 'open') {
      cycles.push([...path.slice(path.indexOf(file)), file].join(' → '));
      return;
    }
    state.set(file, 'open');
    for (const next of graph.get(file) ?? []) visit(next, [...path, file]);
    state.set(file, 'done');
  };
  for (const file of files) visit(file, []);
  assert.deepEqual(cycles, []);
});

test('the built floodgate/http loads without dist/redis', async () => {
  // Built apart from dist/ (which benches and other tests may be reading), inside node_modules so that the
  // package's dependencies resolve.
  mkdirSync(join(root, 'node_modules', '.cache'), { recursive: true });
  const out = mkdtempSync(join(root, 'node_modules', '.cache', 'floodgate-layers-'));
  try {
    await run(process.execPath, [
      join(root, 'node_modules', 'typescript', 'bin', 'tsc'),
      '-p',
      join(root, 'tsconfig.build.json'),
      '--outDir',
      out,
      '--declaration',
      'false',
      '--sourceMap',
      'false',
    ]);
    writeFileSync(join(out, 'package.json'), '{ "type": "commonjs" }\n');
    rmSync(join(out, 'redis'), { recursive: true, force: true });
    const entry = join(out, 'http', 'index.js');
    const { stdout } = await run(process.execPath, [
      '--input-type=module',
      '-e',
      `const http = await import(${JSON.stringify(entry)}); console.log(typeof http.RateLimiting);`,
    ]);
    assert.equal(stdout.trim(), 'function', `loaded ${relative(root, entry)} with no redis/ beside it`);
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});
