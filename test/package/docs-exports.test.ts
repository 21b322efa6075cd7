import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import * as http from '../../src/http/index.ts';
import { repo } from './packed.ts';
import { pages } from './snippets.ts';

const docs = pages(repo)
  .map((page) => readFileSync(join(repo, page), 'utf8'))
  .join('\n');

test('every value floodgate/http exports is documented by name in README.md or docs/', () => {
  const exported = Object.keys(http);
  assert.ok(exported.length >= 20, `${exported.length} exports`);
  const missing = exported.filter((name) => !new RegExp(`\`${name}\\b`).test(docs));
  assert.deepEqual(missing, [], 'document them (docs/http.md) or stop exporting them');
});
