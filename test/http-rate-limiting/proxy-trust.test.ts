import assert from 'node:assert/strict';
import http from 'node:http';
import { createRequire } from 'node:module';
import { afterEach, beforeEach, describe, test } from 'node:test';
import express from 'express';
import Fastify from 'fastify';
import { rateLimiting as expressRateLimiting } from '../../src/adapters/express/rate-limiting.ts';
import { rateLimiting as fastifyRateLimiting } from '../../src/adapters/fastify/rate-limiting.ts';
import { rateLimiting as koaRateLimiting } from '../../src/adapters/koa/rate-limiting.ts';
import { clientIp, resetClientIpWarnings, UNKNOWN_CLIENT } from '../../src/http/client-ip.ts';
import { RateLimiting } from '../../src/http/rate-limiting/engine.ts';
import { resetWarnings } from '../../src/http/warnings.ts';
import { fixedWindow, partitioned } from '../../src/index.ts';
import { start as startKoa } from '../koa/app.ts';
import { adapters, getFrom, listen } from './apps.ts';

/** clientIp() follows the framework's trust setting, and says so loudly when the setting is wrong. */
const warnings: Array<{ code?: string; message: string }> = [];
const onWarning = (warning: Error & { code?: string }) => {
  if (warning.code?.startsWith('FLOODGATE_')) warnings.push({ code: warning.code, message: warning.message });
};
beforeEach(() => {
  resetWarnings();
  resetClientIpWarnings();
  warnings.length = 0;
  process.on('warning', onWarning);
});
afterEach(() => {
  process.off('warning', onWarning);
});

// Warnings are emitted on the next tick.
const settle = () => new Promise((resolve) => setImmediate(resolve));

async function keysSeen(start: () => Promise<{ url: string; close(): Promise<void> }>, xffs: string[]) {
  const app = await start();
  try {
    const statuses: number[] = [];
    for (const xff of xffs)
      statuses.push((await getFrom(`${app.url}/`, '127.0.0.1', { 'x-forwarded-for': xff })).status);
    return statuses;
  } finally {
    await app.close();
  }
}

const express4 = createRequire(import.meta.url)('express4') as typeof express;

function expressApp(trust: unknown, key = clientIp(), factory: typeof express = express) {
  return async () => {
    const app = factory();
    app.set('trust proxy', trust);
    const global = partitioned({ key, limiter: fixedWindow({ permitLimit: 1, window: '1m' }) });
    app.use(expressRateLimiting({ global }));
    app.get('/', (_req, res) => {
      res.send('ok');
    });
    return listen(http.createServer(app));
  };
}

function fastifyApp(trustProxy: unknown, key = clientIp()) {
  return async () => {
    const app = Fastify({ trustProxy: trustProxy as boolean });
    const global = partitioned({ key, limiter: fixedWindow({ permitLimit: 1, window: '1m' }) });
    await app.register(fastifyRateLimiting, { global });
    app.get('/', async () => 'ok');
    await app.ready();
    return listen(app.server);
  };
}

describe('clientIp() follows the framework', () => {
  for (const [name, app] of [
    ['Express trust proxy', expressApp],
    [
      'Express 4 trust proxy',
      (trust: unknown, key?: ReturnType<typeof clientIp>) => expressApp(trust, key, express4),
    ],
    ['Fastify trustProxy', fastifyApp],
  ] as const) {
    test(`${name} 'loopback': clients behind the proxy get their own keys`, async () => {
      const statuses = await keysSeen(app('loopback'), ['203.0.113.1', '203.0.113.2', '203.0.113.1']);
      assert.deepEqual(statuses, [200, 200, 429]);
      await settle();
      assert.deepEqual(warnings, []);
    });

    test(`${name} unset: one key, the proxy's, and a warning once saying what to configure`, async () => {
      const statuses = await keysSeen(app(false), ['203.0.113.1', '203.0.113.2']);
      assert.deepEqual(statuses, [200, 429]);
      await settle();
      assert.equal(warnings.length, 1);
      assert.equal(warnings[0].code, 'FLOODGATE_UNTRUSTED_PROXY');
      assert.match(warnings[0].message, /trustedProxies: \['loopback'\]/);
    });

    test(`${name} true: a warning that every proxy is trusted`, async () => {
      await keysSeen(app(true), ['203.0.113.1', '203.0.113.2']);
      await settle();
      assert.deepEqual(
        warnings.map((w) => w.code),
        ['FLOODGATE_TRUST_ALL_PROXIES'],
      );
    });

    test(`${name}: an explicit clientIp({ trustedProxies }) overrides it`, async () => {
      // The framework trusts the loopback proxy; floodgate is told to trust nothing but 10.0.0.0/8.
      const statuses = await keysSeen(app('loopback', clientIp({ trustedProxies: ['10.0.0.0/8'] })), [
        '203.0.113.1',
        '203.0.113.2',
      ]);
      assert.deepEqual(statuses, [200, 429], 'keyed by the socket peer');
    });

    test(`${name}: validate: false silences the warnings`, async () => {
      await keysSeen(app(false, clientIp({ validate: false })), ['203.0.113.1']);
      await keysSeen(app(true, clientIp({ validate: false })), ['203.0.113.1']);
      await settle();
      assert.deepEqual(warnings, []);
    });
  }

  test('Express trust proxy keeps IPv6 /64 grouping', () => {
    const key = clientIp();
    const req = (ip: string) => ({
      headers: {},
      socket: { remoteAddress: '127.0.0.1' },
      ip,
      app: { settings: { 'trust proxy': 1 } },
    });
    assert.equal(key(req('2001:db8:1:2::1')), '2001:db8:1:2::/64');
    assert.equal(key(req('2001:db8:1:2:ffff::9')), '2001:db8:1:2::/64');
    assert.equal(key(req('::ffff:203.0.113.9')), '203.0.113.9');
  });
});

const koa: (typeof adapters)[string] = (spec) =>
  startKoa((app) => {
    app.use(koaRateLimiting(spec.options));
    app.use((ctx) => {
      ctx.body = 'ok';
    });
  });

describe('the untrusted-proxy warning', () => {
  for (const [name, start] of Object.entries({ ...adapters, koa })) {
    test(`${name}: comes with the first forwarded header, after requests without one`, async () => {
      const global = partitioned({ key: clientIp(), limiter: fixedWindow({ permitLimit: 9, window: '1m' }) });
      const server = await start({ options: { global }, routes: [{ path: '/' }] });
      try {
        await getFrom(`${server.url}/`, '127.0.0.1');
        await settle();
        assert.equal(warnings.length, 0, 'no forwarded header yet');
        // Not the 65th request (the check was sampled, 1 in 64): the first one that carries the header.
        await getFrom(`${server.url}/`, '127.0.0.1', { 'X-Forwarded-For': '203.0.113.1' });
        await settle();
        assert.deepEqual(
          warnings.map((w) => w.code),
          ['FLOODGATE_UNTRUSTED_PROXY'],
        );
        await getFrom(`${server.url}/`, '127.0.0.1', { forwarded: 'for=203.0.113.2' });
        await settle();
        assert.equal(warnings.length, 1, 'once');
      } finally {
        await server.close();
      }
    });
  }
});

describe('rateLimiting({ validate })', () => {
  test('validate: false silences the warnings of the process; a non-boolean is a TypeError', async () => {
    assert.throws(
      () => new RateLimiting({ validate: 'no' as never }),
      /rateLimiting: validate must be a boolean/,
    );
    new RateLimiting({ validate: true });
    const key = clientIp();
    key({ headers: { 'x-forwarded-for': '203.0.113.1' }, socket: { remoteAddress: '127.0.0.1' } });
    await settle();
    assert.equal(warnings.length, 1, 'warned while not silenced');
    resetWarnings();
    resetClientIpWarnings();
    warnings.length = 0;
    new RateLimiting({ validate: false });
    clientIp()({ headers: { 'x-forwarded-for': '203.0.113.1' }, socket: { remoteAddress: '127.0.0.1' } });
    await settle();
    assert.deepEqual(warnings, []);
  });
});

describe('trustedProxies named ranges', () => {
  const req = (peer: string, xff: string) => ({
    headers: { 'x-forwarded-for': xff },
    socket: { remoteAddress: peer },
  });
  test("'loopback', 'linklocal', 'uniquelocal' as in proxy-addr", () => {
    const key = clientIp({ trustedProxies: ['loopback', 'linklocal', 'uniquelocal'] });
    for (const peer of [
      '127.0.0.1',
      '::1',
      '169.254.1.1',
      'fe80::1',
      '10.1.2.3',
      '172.16.0.1',
      '192.168.1.1',
      'fd00::1',
    ]) {
      assert.equal(key(req(peer, '203.0.113.5')), '203.0.113.5', peer);
    }
    assert.equal(key(req('198.51.100.1', '203.0.113.5')), '198.51.100.1', 'a public peer is not trusted');
    assert.equal(key(req('127.0.0.1', '203.0.113.5, 10.0.0.2')), '203.0.113.5', 'trusted hops are walked');
  });
  test('an unknown name is a TypeError naming it', () => {
    assert.throws(
      () => clientIp({ trustedProxies: ['loopbak'] }),
      /trustedProxies\[0\].*'loopback'.*got "loopbak"/,
    );
  });
});

describe('Hono off Node', () => {
  const request = new Request('http://x/');
  test("the runtime's address: Bun's requestIP, Deno's remoteAddr", () => {
    const key = clientIp();
    const bun = {
      req: { raw: request },
      env: { requestIP: (r: Request) => (r === request ? { address: '203.0.113.8' } : null) },
    };
    const deno = { req: { raw: request }, env: { remoteAddr: { hostname: '2001:db8::5', port: 1 } } };
    assert.equal(key(bun), '203.0.113.8');
    assert.equal(key(deno), '2001:db8::/64');
  });
  test('no address at all: every client shares one key, and a warning says how to key instead', async () => {
    const key = clientIp();
    const worker = { req: { raw: request }, env: { SOME_BINDING: {} } };
    assert.equal(key(worker), UNKNOWN_CLIENT);
    key(worker);
    await settle();
    assert.deepEqual(
      warnings.map((w) => w.code),
      ['FLOODGATE_NO_CLIENT_ADDRESS'],
    );
    assert.match(warnings[0].message, /cf-connecting-ip/);
  });
});
