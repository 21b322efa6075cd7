/** docs/cli.md describes the tour as it is: one row per chapter, in order, none missing, none extra. */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { chapters } from '../../src/cli/tour/index.ts';

test('docs/cli.md lists every tour chapter', () => {
  const text = readFileSync(new URL('../../docs/cli.md', import.meta.url), 'utf8');
  const table = text.slice(text.indexOf('| chapter | what it shows |'));
  const rows = [...table.matchAll(/^\| (\d+) \|/gm)].map((m) => Number(m[1]));
  assert.deepEqual(
    rows,
    chapters.map((_, i) => i + 1),
  );
});
