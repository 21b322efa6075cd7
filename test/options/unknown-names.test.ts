/**
 * Every options object of the public API refuses names it does not know, with the closest known one: a
 * misspelt option must never be silently ignored (`fixedWindow({ queuelimit: 5 })` would have no queue).
 * The walk below covers every exported factory; a new export must be added to it or to NO_OPTIONS.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Fastify from 'fastify';
import * as express from '../../src/adapters/express/index.ts';
import * as fastify from '../../src/adapters/fastify/index.ts';
import * as hono from '../../src/adapters/hono/index.ts';
import * as koa from '../../src/adapters/koa/index.ts';
import * as node from '../../src/adapters/node/index.ts';
import * as fetchApi from '../../src/fetch/index.ts';
import * as http from '../../src/http/index.ts';
import * as core from '../../src/index.ts';
import { closest, editDistance, rejectUnknown } from '../../src/options/known.ts';
import * as redis from '../../src/redis/index.ts';
import { clients, type TestClient } from '../redis/clients.ts';
import { RedisServer } from '../support/redis-server.ts';

const window = { permitLimit: 5, window: '1m' } as const;
const limiter = () => core.fixedWindow(window);
// Misspelt options are what this file is about: the casts let them past TypeScript, as a JavaScript caller is.
// biome-ignore lint/suspicious/noExplicitAny: see above
const loose = (value: object): any => value;

let server: RedisServer;
let client: TestClient;
before(async () => {
  server = await RedisServer.start();
  client = await clients.ioredis(server.port);
});
after(async () => {
  await client.close();
  await server.stop();
});

/** Each factory with one misspelt option, and the message it must give. */
const cases: Array<[name: string, call: () => unknown, message: string]> = [
  [
    'fixedWindow',
    () => core.fixedWindow(loose({ ...window, queuelimit: 5 })),
    'fixedWindow: unknown option "queuelimit"; did you mean "queueLimit"?',
  ],
  [
    'slidingWindow',
    () => core.slidingWindow(loose({ ...window, segmentsPerWindow: 4, segmentPerWindow: 4 })),
    'slidingWindow: unknown option "segmentPerWindow"; did you mean "segmentsPerWindow"?',
  ],
  [
    'tokenBucket',
    () =>
      core.tokenBucket(
        loose({ tokenLimit: 5, tokensPerPeriod: 1, period: '1s', replenishmnet: 'continuous' }),
      ),
    'tokenBucket: unknown option "replenishmnet"; did you mean "replenishment"?',
  ],
  [
    'lockout',
    () => core.lockout(loose({ failures: 5, within: '15m', lockFor: '1m', maxLockfor: '1h' })),
    'lockout: unknown option "maxLockfor"; did you mean "maxLockFor"?',
  ],
  [
    'concurrency',
    () => core.concurrency(loose({ permitLimit: 1, queueOrdr: 'newest-first' })),
    'concurrency: unknown option "queueOrdr"; did you mean "queueOrder"?',
  ],
  [
    'adaptiveConcurrency',
    () => core.adaptiveConcurrency(loose({ algorithm: 'vegas', maxLimt: 50 })),
    'adaptiveConcurrency: unknown option "maxLimt"; did you mean "maxLimit"?',
  ],
  [
    'partitioned',
    () => core.partitioned(loose({ key: String, limiter: limiter(), maxPartition: 10 })),
    'partitioned: unknown option "maxPartition"; did you mean "maxPartitions"?',
  ],
  [
    'clientIp',
    () => http.clientIp(loose({ trustedProxy: ['10.0.0.1'] })),
    'clientIp: unknown option "trustedProxy"; did you mean "trustedProxies"?',
  ],
  [
    'validatedKey',
    () => http.validatedKey(loose({ from: () => 'k', validate: () => true, fallbak: () => 'x' })),
    'validatedKey: unknown option "fallbak"; did you mean "fallback"?',
  ],
  [
    'partitionKeyHasher',
    () => http.partitionKeyHasher(loose({ cachesize: 10 })),
    'partitionKeyHasher: unknown option "cachesize"; did you mean "cacheSize"?',
  ],
  [
    'requestTimeouts (floodgate/http)',
    () => http.requestTimeouts(loose({ defualt: '1s' })),
    'requestTimeouts: unknown option "defualt"; did you mean "default"?',
  ],
  [
    'requestTimeouts: a policy object',
    () => http.requestTimeouts(loose({ policies: { slow: { timeout: '1s', stauts: 503 } } })),
    'requestTimeouts: policies.slow: unknown option "stauts"; did you mean "status"?',
  ],
  [
    'requestTimeouts: the default policy',
    () => http.requestTimeouts(loose({ default: { timout: '1s' } })),
    'requestTimeouts: default: unknown option "timout"; did you mean "timeout"?',
  ],
  [
    'rateLimitedFetch',
    () => fetchApi.rateLimitedFetch(loose({ limiter: limiter(), onlimited: 'throw' })),
    'rateLimitedFetch: unknown option "onlimited"; did you mean "onLimited"?',
  ],
  [
    'rateLimitedFetch: pause',
    () => fetchApi.rateLimitedFetch(loose({ limiter: limiter(), pause: { maxEntry: 5 } })),
    'rateLimitedFetch: pause: unknown option "maxEntry"; did you mean "maxEntries"?',
  ],
  [
    'rateLimitedFetch: retry',
    () => fetchApi.rateLimitedFetch(loose({ limiter: limiter(), retry: { attempts: 1, method: ['GET'] } })),
    'rateLimitedFetch: retry: unknown option "method"; did you mean "methods"?',
  ],
  [
    'rateLimitInterceptor',
    () => fetchApi.rateLimitInterceptor(loose({ limiter: limiter(), maxpartitions: 5 })),
    'rateLimitInterceptor: unknown option "maxpartitions"; did you mean "maxPartitions"?',
  ],
  [
    'redisStore',
    () => redis.redisStore(loose({ client: client.client, timeout: 50 })),
    'redisStore: unknown option "timeout"; did you mean "timeoutMs"?',
  ],
  [
    'store.limiter',
    () => redis.redisStore({ client: client.client }).limiter(limiter(), loose({ name: 'a', hashtag: 'x' })),
    'store.limiter: unknown option "hashtag"; did you mean "hashTag"?',
  ],
  [
    'store.partitioned',
    () =>
      redis
        .redisStore({ client: client.client })
        .partitioned(loose({ name: 'a', key: String, limiter: limiter(), keys: String })),
    'store.partitioned: unknown option "keys"; did you mean "key"?',
  ],
];
// Each adapter's rateLimiting() has its own request types; the walk needs only "takes an options object".
type AnyRateLimiting = {
  rateLimiting: (options?: never) => unknown;
  requestTimeouts: (options?: never) => unknown;
};
const adapters = { node, express, hono, koa } as unknown as Record<string, AnyRateLimiting>;
for (const [adapter, api] of Object.entries(adapters)) {
  cases.push(
    [
      `rateLimiting (${adapter})`,
      () => api.rateLimiting(loose({ global: limiter(), dryrun: true })),
      'rateLimiting: unknown option "dryrun"; did you mean "dryRun"?',
    ],
    [
      `rateLimiting: a policy object (${adapter})`,
      () => api.rateLimiting(loose({ policies: { api: { limiter: limiter(), onReject: () => {} } } })),
      'rateLimiting: policies.api: unknown option "onReject"; did you mean "onRejected"?',
    ],
    [
      `requestTimeouts (${adapter})`,
      () => api.requestTimeouts(loose({ onTimeOut: () => {} })),
      'requestTimeouts: unknown option "onTimeOut"; did you mean "onTimeout"?',
    ],
  );
}

/** Exported functions that take no options object. */
const NO_OPTIONS = new Set([
  'chain',
  // The usage readers take a response.
  'jsonUsage',
  'llmUsage',
  'sseUsage',
  'parseDuration',
  'headerValue',
  'rateLimitHeaders',
  'rejectionBody',
  'retryAfterSeconds',
  'requestTimeoutOf',
  'disconnectReason',
  'isAbortReason',
  'isTimeoutReason',
  'timeoutReason',
  'parseHttpDate',
  'parseRateLimit',
  'rateLimitWaitMs',
  'retryAfterMs',
  'isUnavailableAnswer',
  'defaultIsFailure',
  'isNetworkError',
  'routeTemplate',
]);

describe('unknown option names', () => {
  for (const [name, call, message] of cases) {
    test(name, () => {
      assert.throws(call, (error: Error) => error instanceof TypeError && error.message === message);
    });
  }

  test('Fastify: rateLimiting and requestTimeouts fail registration', async () => {
    await assert.rejects(
      async () => {
        const app = Fastify();
        await app.register(fastify.rateLimiting, loose({ global: limiter(), statuss: 503 }));
        await app.ready();
      },
      { name: 'TypeError', message: 'rateLimiting: unknown option "statuss"; did you mean "status"?' },
    );
    await assert.rejects(
      async () => {
        const app = Fastify();
        await app.register(fastify.requestTimeouts, loose({ polices: {} }));
        await app.ready();
      },
      { name: 'TypeError', message: 'requestTimeouts: unknown option "polices"; did you mean "policies"?' },
    );
  });

  test('every exported factory is walked above', () => {
    const covered = new Set(cases.map(([name]) => name.split(/[ :]/)[0].replace(/^store\..*/, 'redisStore')));
    covered.add('rateLimiting').add('requestTimeouts');
    for (const module of [core, http, fetchApi, redis, node, express, fastify, hono, koa]) {
      for (const [name, value] of Object.entries(module)) {
        if (typeof value !== 'function' || !/^[a-z]/.test(name) || NO_OPTIONS.has(name)) continue;
        assert.ok(covered.has(name), `${name} takes options: add a misspelt-option case for it`);
      }
    }
  });

  test('a far-off name gets no suggestion; the names known to other options pass', () => {
    assert.throws(
      () => core.fixedWindow(loose({ ...window, colour: 'blue' })),
      (error: Error) => error.message === 'fixedWindow: unknown option "colour"',
    );
    // Options declared for features that land separately must not be refused by this check.
    const named = { limiter: limiter(), skip: () => false, skipSuccessfulRequests: true };
    assert.doesNotThrow(() => node.rateLimiting(loose({ policies: { api: named } })));
  });
});

describe('closest()', () => {
  test('case, one edit, a swap of neighbours; nothing when too far', () => {
    const known = ['queueLimit', 'queueOrder', 'permitLimit', 'window'];
    assert.equal(closest('QUEUELIMIT', known), 'queueLimit');
    assert.equal(closest('permitLimt', known), 'permitLimit');
    assert.equal(closest('windwo', known), 'window');
    assert.equal(closest('limit', known), undefined);
    assert.equal(closest('permit', known), 'permitLimit', 'a name cut short');
    assert.equal(closest('qu', known), undefined, 'too short to be meant');
    assert.equal(editDistance('ab', 'ba'), 1);
    assert.equal(editDistance('kitten', 'sitting'), 3);
  });

  test('rejectUnknown() ignores what is not an object, and shortens a long name', () => {
    assert.doesNotThrow(() => rejectUnknown('x', undefined, []));
    assert.throws(
      () => rejectUnknown('x', { ['a'.repeat(100)]: 1 }, ['b']),
      (error: Error) => error.message === `x: unknown option "${'a'.repeat(60)}…"`,
    );
  });
});

describe('partitionKeySecret', () => {
  test('shorter than 16 characters: refused, naming the option and the length, never the secret', () => {
    for (const api of Object.values(adapters)) {
      assert.throws(
        () => api.rateLimiting(loose({ global: limiter(), partitionKeySecret: 'hunter2-hunter2' })),
        (error: Error) =>
          error instanceof RangeError &&
          error.message ===
            'rateLimiting: partitionKeySecret must be at least 16 characters long; got 15 (the secret is not shown)',
      );
    }
    assert.throws(
      () => node.rateLimiting(loose({ global: limiter(), partitionKeySecret: 1234567890123456 })),
      (error: Error) =>
        error instanceof TypeError &&
        error.message ===
          'rateLimiting: partitionKeySecret must be a string of at least 16 characters; got number',
    );
  });

  test('16 characters are enough', () => {
    assert.doesNotThrow(() =>
      node.rateLimiting({ global: limiter(), partitionKeySecret: 'hunter2-hunter2!' }),
    );
  });
});
