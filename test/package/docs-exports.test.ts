import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import * as express from '../../src/adapters/express/index.ts';
import * as fastify from '../../src/adapters/fastify/index.ts';
import * as hono from '../../src/adapters/hono/index.ts';
import * as koa from '../../src/adapters/koa/index.ts';
import * as nestjs from '../../src/adapters/nestjs/index.ts';
import * as node from '../../src/adapters/node/index.ts';
import * as fetch from '../../src/fetch/index.ts';
import * as http from '../../src/http/index.ts';
import * as core from '../../src/index.ts';
import * as redis from '../../src/redis/index.ts';
import { repo } from './packed.ts';
import { pages } from './snippets.ts';

const docs = pages(repo)
  .map((page) => readFileSync(join(repo, page), 'utf8'))
  .join('\n');

const entryPoints = {
  floodgate: core,
  'floodgate/http': http,
  'floodgate/node': node,
  'floodgate/express': express,
  'floodgate/fastify': fastify,
  'floodgate/hono': hono,
  'floodgate/koa': koa,
  'floodgate/nestjs': nestjs,
  'floodgate/fetch': fetch,
  'floodgate/redis': redis,
};

for (const [entryPoint, module] of Object.entries(entryPoints)) {
  test(`every value ${entryPoint} exports is documented by name in README.md or docs/`, () => {
    const exported = Object.keys(module);
    assert.ok(exported.length > 0, `${exported.length} exports`);
    // A decorator is named as it is written: `@RateLimit('login')`.
    const missing = exported.filter((name) => !new RegExp(`\`@?${name}\\b`).test(docs));
    assert.deepEqual(missing, [], 'document them (docs/limiters.md, docs/http.md…) or stop exporting them');
  });
}
