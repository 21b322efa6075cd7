import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { consumer, type Packed, pack, repo, run, tsc, writeTsconfig } from './packed.ts';

const pkg = JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8')) as {
  exports: Record<string, unknown>;
};
const entryPoints = Object.keys(pkg.exports).map((subpath) => `floodgate${subpath.slice(1)}`);

let packed: Packed;
before(async () => {
  packed = await pack();
});
after(() => packed?.remove());

/** The names an entry point exports, loaded in a child process of this Node by `require` or by `import`. */
async function exportedNames(dir: string, specifier: string, how: 'require' | 'import'): Promise<string[]> {
  const json = specifier.endsWith('.json') ? ", { with: { type: 'json' } }" : '';
  const load =
    how === 'require'
      ? `require(${JSON.stringify(specifier)})`
      : `await import(${JSON.stringify(specifier)}${json})`;
  // An ES module entry point re-exports the CommonJS build (`export *`), which brings its __esModule marker along.
  const script = `const m = ${load}; console.log(JSON.stringify(Object.keys(m).filter((k) => k !== 'default' && k !== 'module.exports' && k !== '__esModule').sort()))`;
  const args = how === 'require' ? ['-e', script] : ['--input-type=module', '-e', script];
  const { stdout } = await run(process.execPath, args, { cwd: dir });
  return JSON.parse(stdout) as string[];
}

/**
 * Entry points that cannot load without their framework: Nest's decorators and base classes are values from
 * @nestjs/common and @nestjs/core, applied when the module loads. Every other entry point needs no peer to load.
 */
const needsAtLoad: Record<string, readonly string[]> = {
  'floodgate/nestjs': ['@nestjs/common', '@nestjs/core', 'reflect-metadata', 'rxjs'],
};

test(`every entry point loads by require() and by import on Node ${process.versions.node}, with no optional peer installed`, async () => {
  // ipaddr.js is the one dependency; express, fastify, hono, koa, ioredis, redis, undici and @opentelemetry/api are
  // not there.
  const bare = await consumer(packed, 'bare', { type: 'commonjs' }, ['ipaddr.js']);
  assert.ok(entryPoints.length >= 9, `exports lists ${entryPoints.length} entry points`);
  for (const specifier of entryPoints) {
    const peers = needsAtLoad[specifier];
    const dir =
      peers === undefined
        ? bare
        : await consumer(packed, `bare-${specifier.replace(/\W/g, '-')}`, { type: 'commonjs' }, [
            'ipaddr.js',
            ...peers,
          ]);
    const imported = await exportedNames(dir, specifier, 'import');
    const required = await exportedNames(dir, specifier, 'require');
    if (specifier === 'floodgate/package.json') continue; // loaded both ways; a JSON module has only a default
    assert.ok(imported.length > 0, `${specifier} exports something`);
    assert.deepEqual(required, imported, `${specifier}: the same names by require() and by import`);
    if (/^floodgate\/(node|express|fastify|hono|koa|nestjs)$/.test(specifier)) {
      assert.ok(imported.includes('clientIp'), `${specifier} exports clientIp: one import with rateLimiting`);
    }
  }
});

test('require() and import in one process get one implementation: the same exports, a warning emitted once', async () => {
  const dir = await consumer(packed, 'dual', { type: 'commonjs' }, [
    'ipaddr.js',
    ...needsAtLoad['floodgate/nestjs'],
  ]);
  // A CommonJS script that also imports: every export of every entry point is the very same value both ways (so
  // module state, the limit-change counter, the telemetry instruments, the warnings already emitted, is one), and
  // the untrusted-proxy warning, provoked once through each, is emitted once.
  const script = `
    const warnings = [];
    process.on('warning', (warning) => warnings.push(warning.code));
    (async () => {
      const different = [];
      for (const specifier of ${JSON.stringify(entryPoints.filter((s) => !s.endsWith('.json')))}) {
        const required = require(specifier);
        const imported = await import(specifier);
        for (const name of Object.keys(required)) {
          if (required[name] !== imported[name]) different.push(specifier + ' ' + name);
        }
      }
      const req = { headers: { 'x-forwarded-for': '203.0.113.9' }, socket: { remoteAddress: '127.0.0.1' } };
      require('floodgate/http').clientIp()(req);
      (await import('floodgate/http')).clientIp()(req);
      await new Promise((resolve) => setImmediate(resolve));
      console.log(JSON.stringify({ different, warnings }));
    })();
  `;
  const { stdout } = await run(process.execPath, ['--no-warnings', '-e', script], { cwd: dir });
  assert.deepEqual(JSON.parse(stdout), { different: [], warnings: ['FLOODGATE_UNTRUSTED_PROXY'] });
});

test('a CommonJS TypeScript project (module: nodenext) type-checks against the types and runs', async () => {
  const dir = await consumer(packed, 'cjs-ts', { type: 'commonjs' }, ['ipaddr.js', '@types/node']);
  writeTsconfig(dir, ['main.ts'], { outDir: 'out' });
  writeFileSync(
    join(dir, 'main.ts'),
    [
      "import { createServer } from 'node:http';",
      "import { chain, concurrency, fixedWindow, partitioned } from 'floodgate';",
      "import { clientIp } from 'floodgate/http';",
      "import { rateLimiting } from 'floodgate/node';",
      "import { rateLimitedFetch } from 'floodgate/fetch';",
      '',
      "const perClient = partitioned({ key: (ip: string) => ip, limiter: fixedWindow({ permitLimit: 2, window: '1m' }) });",
      'const limits = chain(perClient, concurrency({ permitLimit: 10 }));',
      "const grants = [1, 2, 3].map(() => limits.tryAcquire('10.0.0.1').granted);",
      'const limit = rateLimiting({ global: partitioned({ key: clientIp(), limiter: fixedWindow({ permitLimit: 1, window: 1000 }) }) });',
      "const server = createServer(limit((_req, res) => { res.end('ok'); }));",
      "const fetchLimited = rateLimitedFetch({ limiter: fixedWindow({ permitLimit: 1, window: '1s' }) });",
      "console.log(JSON.stringify({ grants, server: typeof server.listen, fetch: typeof fetchLimited, cjs: typeof require === 'function' }));",
      '',
    ].join('\n'),
  );
  await run(tsc, ['-p', dir]).catch((error) => assert.fail(`tsc: ${error.stdout}`));
  const { stdout } = await run(process.execPath, [join(dir, 'out', 'main.js')], { cwd: dir });
  assert.deepEqual(JSON.parse(stdout), {
    grants: [true, true, false],
    server: 'function',
    fetch: 'function',
    cjs: true,
  });
});

test('with undici installed, the interceptor composes onto an undici Agent, typed by undici', async () => {
  const dir = await consumer(packed, 'undici-ts', { type: 'module' }, ['ipaddr.js', '@types/node', 'undici']);
  writeTsconfig(dir, ['main.ts'], { outDir: 'out' });
  writeFileSync(
    join(dir, 'main.ts'),
    [
      "import { Agent, type Dispatcher } from 'undici';",
      "import { tokenBucket } from 'floodgate';",
      "import { rateLimitInterceptor } from 'floodgate/fetch';",
      '',
      "const interceptor = rateLimitInterceptor({ limiter: tokenBucket({ tokenLimit: 5, tokensPerPeriod: 5, period: '1s' }) });",
      'const typed: Dispatcher.DispatcherComposeInterceptor = interceptor;',
      'const agent: Dispatcher = new Agent().compose(interceptor, typed);',
      'console.log(JSON.stringify({ agent: typeof agent.dispatch, sent: interceptor.statistics.sent }));',
      'await agent.close();',
      '',
    ].join('\n'),
  );
  await run(tsc, ['-p', dir]).catch((error) => assert.fail(`tsc: ${error.stdout}`));
  const { stdout } = await run(process.execPath, [join(dir, 'out', 'main.js')], { cwd: dir });
  assert.deepEqual(JSON.parse(stdout), { agent: 'function', sent: 0 });
});

/** A node:http server limited to one request per client, asked twice; prints the statuses and what was recorded. */
function serverScript(how: 'require' | 'import', metrics: boolean): string {
  const load = (name: string) => (how === 'require' ? `require('${name}')` : `await import('${name}')`);
  const body = [
    "const http = require('node:http');",
    'const recorded = [];',
    metrics
      ? [
          `const { metrics } = ${load('@opentelemetry/api')};`,
          'const instrument = (name) => ({ add: () => recorded.push(name), record: () => recorded.push(name) });',
          'const meter = { createCounter: instrument, createUpDownCounter: instrument, createHistogram: instrument };',
          'metrics.setGlobalMeterProvider({ getMeter: () => meter });',
        ].join('\n')
      : '',
    `const { fixedWindow, partitioned } = ${load('floodgate')};`,
    `const { clientIp } = ${load('floodgate/http')};`,
    `const { rateLimiting } = ${load('floodgate/node')};`,
    "const limit = rateLimiting({ global: partitioned({ key: clientIp(), limiter: fixedWindow({ permitLimit: 1, window: '1m' }) }) });",
    "const server = http.createServer(limit((req, res) => res.end('ok')));",
    "await new Promise((listening) => server.listen(0, '127.0.0.1', listening));",
    "const url = 'http://127.0.0.1:' + server.address().port + '/';",
    'const statuses = [(await fetch(url)).status, (await fetch(url)).status];',
    'server.close();',
    "console.log(JSON.stringify({ statuses, requests: recorded.filter((name) => name === 'floodgate.requests').length }));",
  ].join('\n');
  return how === 'require'
    ? `(async () => {\n${body}\n})();`
    : body.replace("const http = require('node:http');", "import http from 'node:http';");
}

test("metrics reach the application's MeterProvider by require() and by import; without @opentelemetry/api limits still hold", async () => {
  const withApi = await consumer(packed, 'otel', { type: 'commonjs' }, ['ipaddr.js', '@opentelemetry/api']);
  const bare = await consumer(packed, 'no-otel', { type: 'commonjs' }, ['ipaddr.js']);
  const runs: Array<[string, string[], string]> = [
    [withApi, ['-e', serverScript('require', true)], 'require, SDK registered'],
    [withApi, ['--input-type=module', '-e', serverScript('import', true)], 'import, SDK registered'],
    [bare, ['-e', serverScript('require', false)], 'require, no @opentelemetry/api'],
  ];
  for (const [dir, args, label] of runs) {
    const { stdout } = await run(process.execPath, args, { cwd: dir });
    const expected = label.includes('no @opentelemetry') ? 0 : 2;
    assert.deepEqual(JSON.parse(stdout), { statuses: [200, 429], requests: expected }, label);
  }
});

test('the declarations of every entry point type-check with skipLibCheck off, every optional peer installed', async () => {
  const peers = [
    '@types/node',
    '@types/express',
    'express',
    'fastify',
    'hono',
    'koa',
    '@types/koa',
    '@koa/router',
    '@types/koa__router',
    '@nestjs/common',
    '@nestjs/core',
    'reflect-metadata',
    'rxjs',
    'ioredis',
    'redis',
    'iovalkey',
    '@valkey/valkey-glide',
    'undici',
  ];
  const dir = await consumer(packed, 'all-types', { type: 'module' }, [
    'ipaddr.js',
    '@opentelemetry/api',
    ...peers,
  ]);
  const typed = entryPoints.filter((specifier) => specifier !== 'floodgate/package.json');
  writeTsconfig(dir, ['main.ts'], { noEmit: true });
  writeFileSync(
    join(dir, 'main.ts'),
    `${typed.map((specifier, i) => `import * as entry${i} from '${specifier}';`).join('\n')}\nexport const all = [${typed.map((_, i) => `entry${i}`).join(', ')}];\n`,
  );
  const { stdout } = await run(tsc, ['-p', dir, '--pretty', 'false']).catch(
    (error) => error as { stdout: string },
  );
  // Only floodgate's declarations and the consumer are under test: a peer's own declarations may disagree with
  // another peer's (@types/koa names an Options type that content-disposition 1.x, which Express 5 installs, dropped).
  const ours = stdout
    .split('\n')
    .filter((line) => /error TS/.test(line) && !/^(\.\.\/)*(\w+\/)*node_modules\/(?!floodgate\/)/.test(line));
  assert.deepEqual(ours, [], `tsc:\n${stdout}`);
});
