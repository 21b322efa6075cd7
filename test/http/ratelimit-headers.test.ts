import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import {
  type PolicyState,
  parseHeaderStyles,
  partitionKeyHasher,
  QUOTA_EXCEEDED_TYPE,
  rateLimitHeaders,
  rejectionBody,
  retryAfterSeconds,
  sfString,
} from '../../src/http/ratelimit-headers.ts';

const api: PolicyState = { name: 'api', limit: 100, windowMs: 60_000, remaining: 50, resetAfterMs: 30_000 };
const daily: PolicyState = {
  name: 'daily',
  limit: 1000,
  windowMs: 86_400_000,
  remaining: 10,
  resetAfterMs: 3_600_000,
};
/** A fixed hasher so that `pk` values can be asserted exactly. */
const hasher = partitionKeyHasher({ secret: 'a test secret, not random' });
const NOW = 1_700_000_000_000;

function headers(states: PolicyState[], style: 'draft-10' | 'draft-7' | 'draft-6' | 'legacy') {
  return rateLimitHeaders(states, [style], { partitionKeys: hasher, now: NOW });
}

describe('rateLimitHeaders() draft-10', () => {
  test('one policy', () => {
    assert.deepEqual(headers([api], 'draft-10'), [
      ['RateLimit-Policy', '"api";q=100;w=60'],
      ['RateLimit', '"api";r=50;t=30'],
    ]);
  });

  test('multiple policies: one list item each, in order', () => {
    assert.deepEqual(headers([api, daily], 'draft-10'), [
      ['RateLimit-Policy', '"api";q=100;w=60, "daily";q=1000;w=86400'],
      ['RateLimit', '"api";r=50;t=30, "daily";r=10;t=3600'],
    ]);
  });

  test('pk is a salted hash as an sf-binary, the same in both fields', () => {
    const [[, policy], [, limit]] = headers([{ ...api, partitionKey: '203.0.113.7' }], 'draft-10');
    const pk = `:${hasher('203.0.113.7')}:`;
    assert.match(pk, /^:[A-Za-z0-9+/]{16}:$/);
    assert.equal(policy, `"api";q=100;w=60;pk=${pk}`);
    assert.equal(limit, `"api";r=50;t=30;pk=${pk}`);
  });

  test('a quota unit other than requests is sent as qu', () => {
    const [[, policy]] = headers([{ ...api, unit: 'concurrent-requests', windowMs: undefined }], 'draft-10');
    assert.equal(policy, '"api";q=100;qu="concurrent-requests"');
    const [[, requests]] = headers([{ ...api, unit: 'requests' }], 'draft-10');
    assert.equal(requests, '"api";q=100;w=60');
  });

  test('missing window and reset are left out', () => {
    assert.deepEqual(headers([{ name: 'c', limit: 10, remaining: 3 }], 'draft-10'), [
      ['RateLimit-Policy', '"c";q=10'],
      ['RateLimit', '"c";r=3'],
    ]);
  });

  test('seconds round up; a sub-second window is 1; odd numbers are clamped to sf-integers', () => {
    const odd = { name: 'x', limit: 10.7, windowMs: 250, remaining: -3, resetAfterMs: 1001 };
    assert.deepEqual(headers([odd], 'draft-10'), [
      ['RateLimit-Policy', '"x";q=10;w=1'],
      ['RateLimit', '"x";r=0;t=2'],
    ]);
    const huge = {
      name: 'x',
      limit: Number.POSITIVE_INFINITY,
      remaining: Number.NaN,
      resetAfterMs: Number.NaN,
    };
    assert.deepEqual(headers([huge], 'draft-10'), [
      ['RateLimit-Policy', '"x";q=999999999999999'],
      ['RateLimit', '"x";r=0'],
    ]);
  });

  test('names are sanitised into sf-strings', () => {
    const [[, policy]] = headers([{ ...api, name: 'say "hi"\\ \n\té' }], 'draft-10');
    assert.equal(policy, '"say \\"hi\\"\\\\ ";q=100;w=60');
  });

  test('no states, no fields', () => {
    assert.deepEqual(rateLimitHeaders([], ['draft-10', 'legacy']), []);
  });
});

describe('rateLimitHeaders() older shapes', () => {
  test('draft-7 reports the tightest policy in RateLimit, all in RateLimit-Policy', () => {
    assert.deepEqual(headers([api, daily], 'draft-7'), [
      ['RateLimit-Policy', '100;w=60, 1000;w=86400'],
      ['RateLimit', 'limit=1000, remaining=10, reset=3600'],
    ]);
    assert.deepEqual(headers([api], 'draft-7'), [
      ['RateLimit-Policy', '100;w=60'],
      ['RateLimit', 'limit=100, remaining=50, reset=30'],
    ]);
  });

  test('draft-6 writes separate fields', () => {
    assert.deepEqual(headers([api], 'draft-6'), [
      ['RateLimit-Policy', '100;w=60'],
      ['RateLimit-Limit', '100'],
      ['RateLimit-Remaining', '50'],
      ['RateLimit-Reset', '30'],
    ]);
  });

  test('legacy X-RateLimit-Reset is Unix time in seconds, rounded up', () => {
    assert.deepEqual(headers([{ ...api, resetAfterMs: 1500 }], 'legacy'), [
      ['X-RateLimit-Limit', '100'],
      ['X-RateLimit-Remaining', '50'],
      ['X-RateLimit-Reset', String(1_700_000_002)],
    ]);
  });

  test('an unknown reset is left out', () => {
    const noReset = { name: 'c', limit: 10, remaining: 3 };
    assert.deepEqual(headers([noReset], 'draft-7'), [
      ['RateLimit-Policy', '10'],
      ['RateLimit', 'limit=10, remaining=3'],
    ]);
    assert.deepEqual(
      headers([noReset], 'draft-6').map(([name]) => name),
      ['RateLimit-Policy', 'RateLimit-Limit', 'RateLimit-Remaining'],
    );
    assert.deepEqual(
      headers([noReset], 'legacy').map(([name]) => name),
      ['X-RateLimit-Limit', 'X-RateLimit-Remaining'],
    );
  });

  test('ties on remaining go to the longer wait', () => {
    const soon = { ...api, name: 'a', remaining: 0, resetAfterMs: 1000 };
    const late = { ...api, name: 'b', remaining: 0, resetAfterMs: 9000 };
    assert.deepEqual(headers([soon, late], 'draft-6')[3], ['RateLimit-Reset', '9']);
    assert.deepEqual(headers([late, soon], 'draft-6')[3], ['RateLimit-Reset', '9']);
  });

  test('styles combine in the order given', () => {
    const names = rateLimitHeaders([api], ['legacy', 'draft-10']).map(([name]) => name);
    assert.deepEqual(names, [
      'X-RateLimit-Limit',
      'X-RateLimit-Remaining',
      'X-RateLimit-Reset',
      'RateLimit-Policy',
      'RateLimit',
    ]);
  });
});

describe('partition keys', () => {
  test('pk never contains the key, in any encoding', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 8, maxLength: 64 }), (key) => {
        const fields = rateLimitHeaders([{ ...api, partitionKey: key }], ['draft-10']);
        for (const [, value] of fields) {
          const pk = /;pk=(:[^:]*:)$/.exec(value)?.[1];
          assert.ok(pk !== undefined, value);
          assert.ok(!pk.includes(key), key);
          assert.ok(!pk.includes(Buffer.from(key).toString('base64').slice(0, 8)), key);
        }
      }),
      { numRuns: 300 },
    );
    const fields = rateLimitHeaders([{ ...api, partitionKey: '203.0.113.7' }], ['draft-10']);
    assert.ok(!fields.some(([, value]) => value.includes('203.0.113.7')));
  });

  test('one key, one pk; two keys, two pks; another salt, another pk', () => {
    assert.equal(hasher('alice'), hasher('alice'));
    assert.notEqual(hasher('alice'), hasher('bob'));
    assert.notEqual(partitionKeyHasher()('alice'), partitionKeyHasher()('alice'));
    const shared = 'a secret shared by every instance';
    assert.equal(
      partitionKeyHasher({ secret: shared })('alice'),
      partitionKeyHasher({ secret: shared })('alice'),
    );
  });

  test('the cache is bounded and does not change results', () => {
    const small = partitionKeyHasher({ secret: 'a test secret, not random', cacheSize: 2 });
    const uncached = partitionKeyHasher({ secret: 'a test secret, not random', cacheSize: 0 });
    for (const key of ['a', 'b', 'c', 'a', 'd', 'b']) assert.equal(small(key), uncached(key));
  });

  test('rejects a short secret and a bad cache size', () => {
    // The message says what is wrong without showing the secret: error messages end up in logs.
    assert.throws(
      () => partitionKeyHasher({ secret: 'hunter2' }),
      (error: Error) =>
        error instanceof RangeError &&
        error.message ===
          'partitionKeyHasher: secret must be at least 16 characters long; got 7 (the secret is not shown)',
    );
    assert.throws(() => partitionKeyHasher({ cacheSize: -1 }), /cacheSize.*got -1/);
  });
});

describe('retryAfterSeconds()', () => {
  const cases: Array<[ms: number, seconds: number]> = [
    [0, 1],
    [1, 1],
    [999, 1],
    [1000, 1],
    [1001, 2],
    [59_999, 60],
    [-5, 1],
    [Number.NaN, 1],
    [Number.POSITIVE_INFINITY, 2_147_483_647],
  ];
  for (const [ms, seconds] of cases) {
    test(`${ms} ms → ${seconds} s`, () => assert.equal(retryAfterSeconds(ms), seconds));
  }
});

describe('sfString()', () => {
  test('escapes quotes and backslashes, drops what is not printable ASCII', () => {
    assert.equal(sfString('plain name-1'), '"plain name-1"');
    assert.equal(sfString('a"b\\c'), '"a\\"b\\\\c"');
    assert.equal(sfString('tab\there\u0000é😀~'), '"tabhere~"');
    assert.equal(sfString(''), '""');
  });

  test('always serialises a valid sf-string', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), (text) => {
        assert.match(sfString(text), /^"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\["\\])*"$/);
      }),
    );
  });
});

describe('rejectionBody()', () => {
  test('plain text by default', () => {
    assert.deepEqual(rejectionBody(), {
      contentType: 'text/plain; charset=utf-8',
      body: 'Too many requests.',
    });
    assert.equal(rejectionBody({ retryAfterMs: 1000 }).body, 'Too many requests. Try again in 1 second.');
    assert.equal(rejectionBody({ retryAfterMs: 29_001 }).body, 'Too many requests. Try again in 30 seconds.');
  });

  test('problem+json with the quota-exceeded type', () => {
    const { contentType, body } = rejectionBody({
      format: 'problem+json',
      retryAfterMs: 30_000,
      policies: ['api', 'say "hi"'],
    });
    assert.equal(contentType, 'application/problem+json');
    assert.deepEqual(JSON.parse(body), {
      type: 'https://iana.org/assignments/http-problem-types#quota-exceeded',
      title: 'Quota Exceeded',
      status: 429,
      detail: 'Too many requests. Try again in 30 seconds.',
      'violated-policies': ['api', 'say "hi"'],
    });
    assert.equal(QUOTA_EXCEEDED_TYPE, 'https://iana.org/assignments/http-problem-types#quota-exceeded');
  });

  test('problem+json without policies or retry time, another status', () => {
    const { body } = rejectionBody({ format: 'problem+json', status: 503 });
    assert.deepEqual(JSON.parse(body), {
      type: QUOTA_EXCEEDED_TYPE,
      title: 'Quota Exceeded',
      status: 503,
      detail: 'Too many requests.',
    });
  });
});

describe('parseHeaderStyles()', () => {
  test('accepts one style or a list with at most one draft', () => {
    assert.deepEqual(parseHeaderStyles('headers', 'draft-10'), ['draft-10']);
    assert.deepEqual(parseHeaderStyles('headers', ['draft-7', 'legacy']), ['draft-7', 'legacy']);
    assert.deepEqual(parseHeaderStyles('headers', []), []);
  });

  const invalid: Array<[value: unknown, message: RegExp]> = [
    ['draft-8', /headers must be one of .*got "draft-8"/],
    [42, /headers must be one of .*got 42/],
    [['legacy', 'legacy'], /headers lists "legacy" twice/],
    [['draft-10', 'draft-7'], /headers may hold one IETF draft/],
  ];
  for (const [value, message] of invalid) {
    test(`rejects ${JSON.stringify(value)}`, () =>
      assert.throws(() => parseHeaderStyles('headers', value), message));
  }
});
