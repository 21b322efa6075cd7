import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { after, before, test } from 'node:test';
import { consumer, type Packed, pack, repo, run } from './packed.ts';

let packed: Packed;
before(async () => {
  packed = await pack();
});
after(() => packed?.remove());

/** What the tarball may hold: the build (code and types, no source maps), the guides and their charts, the licence. */
const allowed = [
  /^package\.json$/,
  /^README\.md$/,
  /^LICENSE$/,
  /^docs\/[a-z0-9-]+\.md$/,
  /^docs\/[a-z0-9-]+\.svg$/,
  /^dist\/([a-z0-9-]+\/)*[a-z0-9-]+\.js$/,
  /^dist\/([a-z0-9-]+\/)*[a-z0-9-]+\.d\.ts$/,
];

test('the tarball holds the build, its types, the guides and the licence, and nothing else', () => {
  const unexpected = packed.files.filter((path) => !allowed.some((pattern) => pattern.test(path)));
  assert.deepEqual(unexpected, []);
  for (const path of ['package.json', 'README.md', 'LICENSE', 'dist/index.js', 'dist/cli/main.js']) {
    assert.ok(packed.files.includes(path), `${path} is packed`);
  }
  const code = packed.files.filter((path) => path.endsWith('.js'));
  assert.ok(code.length > 50, `${code.length} modules`);
  const untyped = code.filter((path) => !packed.files.includes(path.replace(/\.js$/, '.d.ts')));
  assert.deepEqual(untyped, [], 'every module has its declarations');
  const docs = packed.files.filter((path) => path.startsWith('docs/'));
  assert.ok(docs.length >= 4, `${docs.length} guides`);
});

test('every file package.json names is in the tarball', () => {
  const pkg = JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8'));
  const named: string[] = [pkg.main, pkg.types, ...Object.values<string>(pkg.bin)];
  for (const target of Object.values<string | Record<string, string>>(pkg.exports)) {
    named.push(...(typeof target === 'string' ? [target] : Object.values(target)));
  }
  for (const path of named) assert.ok(packed.files.includes(normalize(path)), `${path} is packed`);
  assert.equal(pkg.license, 'MIT');
  assert.match(
    readFileSync(join(repo, 'LICENSE'), 'utf8'),
    /^MIT License\n\nCopyright \(c\) \d{4} floodgate contributors\n/,
  );
});

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens. */
function anchor(heading: string): string {
  return heading
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');
}

test('every relative link in the packed README and guides reaches a packed file (and its heading)', () => {
  const pages = packed.files.filter((path) => path.endsWith('.md'));
  const broken: string[] = [];
  let links = 0;
  for (const page of pages) {
    const text = readFileSync(join(repo, page), 'utf8').replace(/```[\s\S]*?```/g, '');
    for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/.test(target)) continue; // https:, mailto:
      links++;
      const [path, hash] = target.split('#');
      const file = path === '' ? page : normalize(join(dirname(page), path));
      if (!packed.files.includes(file)) {
        broken.push(`${page}: ${target} (no ${file} in the tarball)`);
        continue;
      }
      if (hash === undefined || !file.endsWith('.md')) continue;
      const headings = [...readFileSync(join(repo, file), 'utf8').matchAll(/^#+ (.+)$/gm)].map((m) =>
        anchor(m[1]),
      );
      if (!headings.includes(hash)) broken.push(`${page}: ${target} (no heading #${hash} in ${file})`);
    }
  }
  assert.deepEqual(broken, []);
  assert.ok(links > 5, `${links} links checked`);
});

test('publint --strict finds nothing to fix', async () => {
  const dir = await consumer(packed, 'publint', {}, []);
  const result = await run(join(repo, 'node_modules', '.bin', 'publint'), [
    'run',
    '--strict',
    '--pack',
    'false',
    join(dir, 'node_modules', 'floodgate'),
  ]).catch((error) => assert.fail(`publint: ${error.stdout}${error.stderr}`));
  assert.match(result.stdout, /All good!/);
});

test('Are the Types Wrong? finds no problem for node16/nodenext and bundlers', async () => {
  // --profile node16: TypeScript's node10 resolution predates exports maps and is gone from TypeScript 7.
  // cjs-resolves-to-esm is what attw (TypeScript 5.6 inside) reports for require() of an ES module; Node 20.19+
  // loads it and TypeScript 5.8+ types it (module: nodenext), as the CommonJS consumer test shows.
  await run(join(repo, 'node_modules', '.bin', 'attw'), [
    '--profile',
    'node16',
    '--ignore-rules',
    'cjs-resolves-to-esm',
    '--format',
    'ascii',
    packed.tarball,
  ]).catch((error) => assert.fail(`attw: ${error.stdout}${error.stderr}`));
});
