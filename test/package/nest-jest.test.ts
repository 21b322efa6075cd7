/**
 * floodgate as a CommonJS application loads it, from its packed tarball: a NestJS application as `nest new`
 * scaffolds it (CommonJS, `ts-jest`, a unit spec and an e2e spec with supertest) whose Jest tests run under Jest 29
 * and Jest 30; a Vitest test; plain `require()` and `import` scripts. CI runs this on Node 20 and again on Node 24
 * (.ci/run). The project is test/package/fixtures/nest-jest, installed by scripts/test-all.sh
 * (`npm ci --prefix test/package/fixtures/nest-jest`) and copied to a temporary directory with the tarball unpacked
 * as its node_modules/floodgate. Without the fixture installed the test skips, except in CI, where it fails.
 */
import assert from 'node:assert/strict';
import { cpSync, existsSync, mkdirSync, readdirSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { type Packed, pack, repo, run } from './packed.ts';

const fixture = fileURLToPath(new URL('./fixtures/nest-jest/', import.meta.url));
const installed = existsSync(join(fixture, 'node_modules', 'jest29', 'package.json'));
const skip =
  installed || process.env.CI
    ? false
    : 'the fixture is not installed: npm ci --prefix test/package/fixtures/nest-jest (scripts/test-all.sh does)';

let packed: Packed | undefined;
let dir: string;

/** Runs `script` (a path under the project's node_modules) with this Node in the project; resolves to its output. */
async function node(script: string, args: readonly string[]): Promise<string> {
  const { stdout, stderr } = await run(process.execPath, [join(dir, 'node_modules', script), ...args], {
    cwd: dir,
    env: { ...process.env, CI: '1', NO_COLOR: '1', FORCE_COLOR: '0' },
    maxBuffer: 16 << 20,
  }).catch((error: { stdout: string; stderr: string }) =>
    assert.fail(`${script} ${args.join(' ')}:\n${error.stdout}\n${error.stderr}`),
  );
  return `${stdout}\n${stderr}`;
}

describe('a CommonJS NestJS project (Jest 29 and 30, ts-jest), Vitest, require() and import, packed', {
  skip,
}, () => {
  before(async () => {
    assert.ok(installed, 'CI runs scripts/test-all.sh, which must install test/package/fixtures/nest-jest');
    packed = await pack();
    dir = join(packed.root, 'nest-jest');
    cpSync(fixture, dir, { recursive: true, filter: (source) => source !== join(fixture, 'node_modules') });
    // The fixture's packages as installed, and floodgate from the tarball with its one dependency.
    const modules = join(dir, 'node_modules');
    mkdirSync(join(modules, 'floodgate'), { recursive: true });
    for (const name of readdirSync(join(fixture, 'node_modules'))) {
      if (!name.startsWith('.')) symlinkSync(join(fixture, 'node_modules', name), join(modules, name), 'dir');
    }
    if (!existsSync(join(modules, 'ipaddr.js'))) {
      symlinkSync(join(repo, 'node_modules', 'ipaddr.js'), join(modules, 'ipaddr.js'), 'dir');
    }
    await run('tar', ['-xzf', packed.tarball, '-C', join(modules, 'floodgate'), '--strip-components=1']);
  });
  after(() => packed?.remove());

  for (const [version, jest] of [
    [29, 'jest29/bin/jest.js'],
    [30, 'jest/bin/jest.js'],
  ] as const) {
    test(`Jest ${version}: the scaffold's unit spec and e2e spec pass`, async () => {
      assert.match(await node(jest, ['--version']), new RegExp(`^${version}\\.`));
      const cache = ['--ci', `--cacheDirectory=${join(dir, `.jest-${version}`)}`];
      const unit = await node(jest, cache);
      assert.match(unit, /Tests:\s+2 passed, 2 total/);
      const e2e = await node(jest, [...cache, '--config', './test/jest-e2e.json']);
      assert.match(e2e, /Tests:\s+2 passed, 2 total/);
    });
  }

  test('Vitest: floodgate limits a node:http server', async () => {
    const output = await node('vitest/vitest.mjs', ['run']);
    assert.match(output, /Tests\s+1 passed \(1\)/);
  });

  test(`plain require() and import on Node ${process.versions.node}`, async () => {
    for (const [script, format] of [
      ['require.cjs', 'commonjs'],
      ['import.mjs', 'module'],
    ]) {
      const { stdout } = await run(process.execPath, [join('plain', script)], { cwd: dir });
      assert.deepEqual(
        JSON.parse(stdout),
        { grants: [true, false], format, rateLimiting: 'function', clientIp: 'function' },
        script,
      );
    }
  });
});
