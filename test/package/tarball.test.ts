import assert from 'node:assert/strict';
import { readFileSync, statSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { after, before, test } from 'node:test';
import { consumer, type Packed, pack, repo, run } from './packed.ts';

let packed: Packed;
before(async () => {
  packed = await pack();
});
after(() => packed?.remove());

/**
 * What the tarball may hold: the build (CommonJS code and its types, dist/package.json saying so, the ES module
 * entry points in dist/esm; no source maps), the guides, the licence.
 */
const allowed = [
  /^package\.json$/,
  /^README\.md$/,
  /^LICENSE$/,
  /^docs\/[a-z0-9-]+\.md$/,
  /^dist\/package\.json$/,
  /^dist\/([a-z0-9-]+\/)*[a-z0-9-]+\.c?js$/,
  /^dist\/([a-z0-9-]+\/)*[a-z0-9-]+\.d\.c?ts$/,
  /^dist\/esm\/[a-z0-9-]+\.d\.mts$/,
  /^dist\/esm\/[a-z0-9-]+\.mjs$/,
];

/** The packed size the package must stay under (issue #23: 414 kB before, benchmark narrative and a chart in it). */
const MAX_PACKED_BYTES = 400_000;

test('the tarball holds the build, its types, the guides and the licence, and nothing else', () => {
  const unexpected = packed.files.filter((path) => !allowed.some((pattern) => pattern.test(path)));
  assert.deepEqual(unexpected, []);
  for (const path of ['package.json', 'README.md', 'LICENSE', 'dist/index.js', 'dist/cli/main.js']) {
    assert.ok(packed.files.includes(path), `${path} is packed`);
  }
  const code = packed.files.filter((path) => /\.[cm]?js$/.test(path));
  assert.ok(code.length > 50, `${code.length} modules`);
  // Declarations ship only where an entry point's types reach (scripts/prune-declarations.mjs): the internal
  // modules (the Lua scripts, the command line) have none. That every reached one is there, the type-checks in
  // entry-points.test.ts prove (skipLibCheck off, attw).
  assert.ok(packed.files.includes('dist/index.d.ts'), 'the main entry point is typed');
  for (const internal of ['dist/redis/lua/decide.d.ts', 'dist/cli/main.d.ts']) {
    assert.ok(!packed.files.includes(internal), `${internal} is not packed: no entry point reaches it`);
  }
  const orphans = packed.files.filter(
    (path) => /\.d\.[cm]?ts$/.test(path) && !packed.files.includes(path.replace(/\.d\.([cm]?)ts$/, '.$1js')),
  );
  assert.deepEqual(orphans, [], 'every declaration belongs to a module');
  assert.deepEqual(
    packed.files.filter((path) => path.startsWith('dist/cli/') && path.endsWith('.d.ts')),
    [],
  );
  const docs = packed.files.filter((path) => path.startsWith('docs/'));
  assert.ok(docs.length >= 4, `${docs.length} guides`);
});

test(`the tarball is under ${MAX_PACKED_BYTES / 1000} kB`, () => {
  const bytes = statSync(packed.tarball).size;
  assert.ok(bytes < MAX_PACKED_BYTES, `${bytes} bytes packed`);
});

test('the build in dist/ is CommonJS, the ES module entry points ES modules; the command runs', async () => {
  const pkg = JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8'));
  assert.equal(pkg.type, 'module', 'the sources, tests and scripts');
  const installed = join(await consumer(packed, 'bin', {}, ['ipaddr.js']), 'node_modules', 'floodgate');
  assert.deepEqual(JSON.parse(readFileSync(join(installed, 'dist/package.json'), 'utf8')), {
    type: 'commonjs',
  });
  const cli = join(installed, pkg.bin.floodgate);
  assert.match(readFileSync(cli, 'utf8'), /^#!\/usr\/bin\/env node\n/, 'the command keeps its shebang');
  const { stdout } = await run(process.execPath, [cli, '--version']);
  assert.equal(stdout, `floodgate ${pkg.version}\n`);
});

test('every file package.json names is in the tarball', () => {
  const pkg = JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8'));
  const named: string[] = [pkg.main, pkg.types, ...Object.values<string>(pkg.bin)];
  const targets = (target: unknown): string[] =>
    typeof target === 'string' ? [target] : Object.values(target as object).flatMap(targets);
  for (const target of Object.values(pkg.exports)) named.push(...targets(target));
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

test('Are the Types Wrong? finds no problem for node10, node16/nodenext and bundlers', async () => {
  // No rule ignored, every resolution: require() resolves to CommonJS code and types, import to ES module ones,
  // and TypeScript's node10 resolution (what `"module": "commonjs"` gives before TypeScript 6) finds the
  // subpaths' types through typesVersions.
  await run(join(repo, 'node_modules', '.bin', 'attw'), ['--format', 'ascii', packed.tarball]).catch(
    (error) => assert.fail(`attw: ${error.stdout}${error.stderr}`),
  );
});
