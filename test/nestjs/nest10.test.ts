/**
 * floodgate/nestjs on Nest 10 (Express 4 under @nestjs/platform-express 10), as npm users get it: the packed
 * package in a project whose @nestjs/* are those of test/nestjs/fixtures/nest10, which scripts/test-all.sh installs
 * (`npm ci --prefix test/nestjs/fixtures/nest10`). A Nest 10 application over real sockets: 429 as an
 * HttpException with body, Retry-After and the RateLimit fields; the global limiter and a route policy as one
 * chain where a rejection burns nothing; @NoRateLimit; per-user keys from a guard that runs first; a policy name
 * that does not exist fails the start. Without the fixture installed the test skips, except in CI, where it fails.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { consumer, type Packed, pack } from '../package/packed.ts';

const fixture = fileURLToPath(new URL('./fixtures/nest10/', import.meta.url));
const installed = existsSync(join(fixture, 'node_modules', '@nestjs', 'core', 'package.json'));
const skip =
  installed || process.env.CI
    ? false
    : 'Nest 10 is not installed: npm ci --prefix test/nestjs/fixtures/nest10 (scripts/test-all.sh does)';
const linked = ['@nestjs/common', '@nestjs/core', '@nestjs/platform-express', 'reflect-metadata', 'rxjs'];

// The application, written as a Nest 10 user without decorator syntax would (decorators applied as calls). Its
// clock is moved by GET /clock/:t (not limited), so that Retry-After is exact.
const app = `
import 'reflect-metadata';
import { Controller, Get, Injectable, Module, Param } from '@nestjs/common';
import { APP_GUARD, NestFactory } from '@nestjs/core';
import { fixedWindow, partitioned } from 'floodgate';
import { clientIp, FloodgateGuard, FloodgateModule, NoRateLimit, RateLimit, requestOf } from 'floodgate/nestjs';

const clock = { t: 0, now() { return this.t; } };
const ip = clientIp();

class Api {
  home() { return 'home'; }
  login() { return 'in'; }
  health() { return 'ok'; }
  setClock(t) { clock.t = Number(t); return 'ok'; }
}
const method = (name, ...decorators) => {
  const descriptor = Object.getOwnPropertyDescriptor(Api.prototype, name);
  for (const d of decorators) d(Api.prototype, name, descriptor);
};
method('home', Get());
method('login', Get('login'), RateLimit(process.env.POLICY ?? 'login'));
method('health', Get('health'), NoRateLimit());
method('setClock', Get('clock/:t'), NoRateLimit());
Param('t')(Api.prototype, 'setClock', 0);
Controller()(Api);

class Auth {
  canActivate(context) {
    const request = requestOf(context);
    const user = request.headers['x-user'];
    if (typeof user === 'string') request.user = { id: user };
    return true;
  }
}
Injectable()(Auth);

class AppModule {}
Module({
  imports: [
    FloodgateModule.forRoot({
      global: partitioned({
        key: (context) => {
          const user = requestOf(context).user;
          return user ? 'user:' + user.id : ip(context);
        },
        limiter: fixedWindow({ permitLimit: 3, window: '10s', clock }),
      }),
      policies: { login: fixedWindow({ permitLimit: 1, window: '10s', clock }) },
    }),
  ],
  controllers: [Api],
  providers: [{ provide: APP_GUARD, useClass: Auth }, { provide: APP_GUARD, useClass: FloodgateGuard }],
})(AppModule);

try {
  const nest = await NestFactory.create(AppModule, { logger: false });
  await nest.listen(0, '127.0.0.1');
  const version = JSON.parse(
    (await import('node:fs')).readFileSync(new URL('./node_modules/@nestjs/core/package.json', import.meta.url), 'utf8'),
  ).version;
  console.log(JSON.stringify({ port: nest.getHttpServer().address().port, version }));
} catch (error) {
  console.log(JSON.stringify({ error: String(error?.message ?? error) }));
  process.exit(0);
}
`;

let packed: Packed | undefined;
let dir: string;
const children: ChildProcess[] = [];

/** Starts the application in a child process; resolves to its first line (the port, or the start's error). */
function startApp(
  env: Record<string, string> = {},
): Promise<{ port?: number; version?: string; error?: string }> {
  const child = spawn(process.execPath, ['app.mjs'], { cwd: dir, env: { ...process.env, ...env } });
  children.push(child);
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk;
  });
  return new Promise((resolve, reject) => {
    let text = '';
    child.stdout.on('data', (chunk: Buffer) => {
      text += chunk;
      const line = text.split('\n')[0];
      if (text.includes('\n')) resolve(JSON.parse(line));
    });
    child.on('exit', (code) => reject(new Error(`the Nest 10 app exited ${code}: ${stderr.slice(-2000)}`)));
  });
}

describe('floodgate/nestjs on Nest 10 (Express platform), packed', { skip }, () => {
  before(async () => {
    assert.ok(installed, 'CI runs scripts/test-all.sh, which must install test/nestjs/fixtures/nest10');
    packed = await pack();
    dir = await consumer(packed, 'nest10', { type: 'module' }, ['ipaddr.js']);
    for (const name of linked) {
      const target = join(dir, 'node_modules', name);
      mkdirSync(dirname(target), { recursive: true });
      symlinkSync(join(fixture, 'node_modules', name), target, 'dir');
    }
    writeFileSync(join(dir, 'app.mjs'), app);
  });
  after(() => {
    for (const child of children) child.kill();
    packed?.remove();
  });

  test('the fixture is Nest 10', () => {
    const core = JSON.parse(readFileSync(join(fixture, 'node_modules/@nestjs/core/package.json'), 'utf8'));
    assert.match(core.version, /^10\./);
  });

  test('429 with body and fields, one chain per request, @NoRateLimit, per-user keys', async () => {
    const started = await startApp();
    assert.equal(started.error, undefined);
    assert.match(started.version!, /^10\./, 'the app runs on Nest 10');
    const url = `http://127.0.0.1:${started.port}`;
    const get = async (path: string, user?: string) => {
      const response = await fetch(url + path, { headers: user === undefined ? {} : { 'x-user': user } });
      return { status: response.status, headers: response.headers, body: await response.text() };
    };
    const first = await get('/login', 'ada');
    assert.deepEqual([first.status, first.body], [200, 'in']);
    assert.match(first.headers.get('ratelimit-policy')!, /"login";q=1;w=10/);
    await get('/clock/4000');
    const rejected = await get('/login', 'ada');
    assert.equal(rejected.status, 429);
    assert.equal(rejected.headers.get('retry-after'), '6');
    assert.match(rejected.headers.get('ratelimit')!, /"login";r=0;t=6/);
    assert.deepEqual(JSON.parse(rejected.body), {
      statusCode: 429,
      message: 'Too many requests. Try again in 6 seconds.',
    });
    // ada's global budget of 3: /login once (the rejection took nothing), then two more; the next is refused.
    assert.equal((await get('/', 'ada')).status, 200);
    assert.equal((await get('/', 'ada')).status, 200);
    assert.equal((await get('/', 'ada')).status, 429);
    assert.equal((await get('/', 'grace')).status, 200, 'another user, another key');
    for (let i = 0; i < 5; i++) assert.equal((await get('/health', 'ada')).status, 200);
  });

  test('a @RateLimit() naming a policy that does not exist fails the start, naming the handler', async () => {
    const started = await startApp({ POLICY: 'logn' });
    assert.match(started.error ?? '', /Api\.login: no rate-limiting policy named "logn"/);
  });
});
