/**
 * The docs are code: every ```ts snippet of README.md and docs/*.md compiles against the packed package, and
 * those that need nothing given also run. How to mark a snippet: see ./snippets.ts.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { consumer, type Packed, pack, repo, run, tsc, writeTsconfig } from './packed.ts';
import { allSnippets } from './snippets.ts';

const all = allSnippets(repo);
const checked = all.filter((snippet) => snippet.skipped === undefined);

/** What snippets may import, as an application that uses floodgate with every framework would have installed. */
const installed = [
  'ipaddr.js',
  '@types/node',
  '@types/express',
  'express',
  'fastify',
  'hono',
  '@hono/node-server',
  'koa',
  '@types/koa',
  '@koa/router',
  '@types/koa__router',
  '@nestjs/common',
  '@nestjs/core',
  '@nestjs/platform-express',
  '@nestjs/throttler',
  '@nestjs/websockets',
  '@nestjs/graphql',
  '@nestjs/apollo',
  'graphql',
  'reflect-metadata',
  'rxjs',
  'ioredis',
  'redis',
  'iovalkey',
  '@valkey/valkey-glide',
  'undici',
  '@opentelemetry/api',
];

let packed: Packed;
let dir: string;
/** tsc's errors by snippet index, at their line in the page. */
const errors = new Map<number, string[]>();

before(async () => {
  packed = await pack();
  dir = await consumer(packed, 'docs', { type: 'module' }, installed);
  const files = checked.map((snippet, index) => {
    const name = `snippet-${index}.ts`;
    const given = snippet.given === '' ? '' : `${snippet.given}\n`;
    writeFileSync(join(dir, name), `${given}${snippet.code}\nexport {};\n`);
    return name;
  });
  // skipLibCheck: the declarations are checked by entry-points.test.ts; here, the snippets.
  // Nest's decorators are TypeScript's legacy ones: a Nest application compiles with experimentalDecorators and
  // emitDecoratorMetadata, which change nothing for the other snippets.
  writeTsconfig(dir, [], {
    lib: ['es2023'],
    skipLibCheck: true,
    outDir: 'out',
    experimentalDecorators: true,
    emitDecoratorMetadata: true,
  });
  // One compilation per snippet: tsc reports no type errors at all while any file has a syntax error.
  for (const [index, snippet] of checked.entries()) {
    const config = `tsconfig-${index}.json`;
    writeFileSync(join(dir, config), JSON.stringify({ extends: './tsconfig.json', files: [files[index]] }));
    const result = await run(tsc, ['-p', config, '--pretty', 'false'], { cwd: dir }).catch(
      (error) => error as { stdout: string },
    );
    const givenLines = snippet.given === '' ? 0 : snippet.given.split('\n').length;
    const [page, fenceLine] = snippet.where.split(':');
    for (const line of result.stdout.split('\n')) {
      const match = /snippet-\d+\.ts\((\d+),(\d+)\): (.*)$/.exec(line);
      if (!match) continue;
      const at = Number(fenceLine) + Number(match[1]) - givenLines;
      errors.set(index, [...(errors.get(index) ?? []), `${page}:${at}:${match[2]} ${match[3]}`]);
    }
  }
});
after(() => packed?.remove());

test('snippets left unchecked say why', () => {
  const unexplained = all.filter((snippet) => snippet.skipped === '').map((snippet) => snippet.where);
  assert.deepEqual(unexplained, [], 'write ```ts no-check: <the reason>');
  assert.ok(checked.length >= 17, `${checked.length} snippets checked`);
});

for (const [index, snippet] of checked.entries()) {
  const runs = snippet.given === '';
  test(`${snippet.where} compiles${runs ? ' and runs' : ''}`, async () => {
    assert.deepEqual(errors.get(index) ?? [], [], `${snippet.where} does not compile`);
    if (!runs) return;
    // The timeout only stops a snippet that never ends (a server left listening) from hanging the suite.
    await run(process.execPath, [join(dir, 'out', `snippet-${index}.js`)], {
      cwd: dir,
      timeout: 60_000,
    }).catch((error) => assert.fail(`${snippet.where} failed when run: ${error.stderr || error.message}`));
  });
}
