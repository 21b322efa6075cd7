// After the build: deletes the declaration files no entry point's types reach (internal modules: the Lua scripts,
// the Redis engine's parts, the CLI). TypeScript never loads them, and they took a fifth of the packed tarball's
// declarations (test/package/tarball.test.ts bounds its size; attw, in entry-points.test.ts, checks every entry
// point's types still resolve).
import { existsSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const DECLARATION = /\.d\.(ts|mts|cts)$/;

const starts = [];
(function collect(value) {
  if (typeof value === 'string') {
    if (DECLARATION.test(value)) starts.push(normalize(join(root, value)));
  } else if (value && typeof value === 'object') for (const v of Object.values(value)) collect(v);
})(pkg.exports);
if (pkg.types) starts.push(normalize(join(root, pkg.types)));

// The declaration a relative specifier in a declaration file names.
function target(from, specifier) {
  const base = normalize(join(dirname(from), specifier));
  const candidates = [base];
  for (const [js, dts] of [
    ['.js', '.d.ts'],
    ['.mjs', '.d.mts'],
    ['.cjs', '.d.cts'],
    ['.ts', '.d.ts'],
    ['.mts', '.d.mts'],
    ['.cts', '.d.cts'],
  ]) {
    if (base.endsWith(js)) candidates.push(base.slice(0, -js.length) + dts);
  }
  candidates.push(`${base}.d.ts`, join(base, 'index.d.ts'));
  return candidates.find((c) => DECLARATION.test(c) && existsSync(c));
}

const reached = new Set();
const stack = [...starts];
while (stack.length > 0) {
  const file = stack.pop();
  if (reached.has(file) || !existsSync(file)) continue;
  reached.add(file);
  const text = readFileSync(file, 'utf8');
  for (const m of text.matchAll(/(?:from|import\s*\(|import)\s*['"](\.{1,2}\/[^'"]+)['"]/g)) {
    const next = target(file, m[1]);
    if (next !== undefined) stack.push(next);
  }
}
if (starts.length === 0 || reached.size === 0)
  throw new Error('prune-declarations: no entry point types found');

let removed = 0;
(function prune(dir) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) prune(path);
    else if (DECLARATION.test(name) && !reached.has(normalize(path))) {
      rmSync(path);
      removed++;
    }
  }
})(join(root, 'dist'));
if (removed === 0) console.error('prune-declarations: nothing to remove (was the build run?)');
