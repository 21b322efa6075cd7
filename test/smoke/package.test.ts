import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

test('package is ESM; the only runtime dependency is ipaddr.js (for floodgate/http)', () => {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'));
  assert.equal(pkg.type, 'module');
  assert.deepEqual(Object.keys(pkg.dependencies ?? {}), ['ipaddr.js']);
  for (const peer of Object.keys(pkg.peerDependencies))
    assert.equal(pkg.peerDependenciesMeta[peer].optional, true);
});
