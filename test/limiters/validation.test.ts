import assert from 'node:assert/strict';
import { test } from 'node:test';
import { chain, concurrency, fixedWindow, slidingWindow, tokenBucket } from '../../src/index.ts';
import { performanceClock } from '../../src/limiters/options.ts';

const cases: [string, () => unknown, RegExp, ErrorConstructor][] = [
  [
    'options missing',
    () => fixedWindow(undefined as never),
    /fixedWindow options must be an object; got undefined/,
    TypeError,
  ],
  [
    'permitLimit 0',
    () => fixedWindow({ permitLimit: 0, window: 1000 }),
    /fixedWindow: permitLimit .*got 0/,
    RangeError,
  ],
  [
    'permitLimit 1.5',
    () => fixedWindow({ permitLimit: 1.5, window: 1000 }),
    /permitLimit .*got 1\.5/,
    RangeError,
  ],
  [
    'permitLimit string',
    () => fixedWindow({ permitLimit: '10' as never, window: 1000 }),
    /permitLimit .*got "10"/,
    TypeError,
  ],
  ['window 0', () => fixedWindow({ permitLimit: 1, window: 0 }), /fixedWindow: window .*got 0/, TypeError],
  [
    'window 10x',
    () => fixedWindow({ permitLimit: 1, window: '10x' as never }),
    /window .*got "10x"/,
    TypeError,
  ],
  ['window NaN', () => fixedWindow({ permitLimit: 1, window: Number.NaN }), /window .*got NaN/, TypeError],
  [
    'queueLimit -1',
    () => fixedWindow({ permitLimit: 1, window: 1, queueLimit: -1 }),
    /queueLimit .*got -1/,
    RangeError,
  ],
  [
    'queueOrder',
    () => fixedWindow({ permitLimit: 1, window: 1, queueOrder: 'lifo' as never }),
    /queueOrder must be one of 'oldest-first', 'newest-first'; got "lifo"/,
    TypeError,
  ],
  [
    'clock',
    () => fixedWindow({ permitLimit: 1, window: 1, clock: {} as never }),
    /clock must be an object with a now\(\)/,
    TypeError,
  ],
  [
    'countRejected',
    () => fixedWindow({ permitLimit: 1, window: 1, countRejected: 'yes' as never }),
    /countRejected must be a boolean; got "yes"/,
    TypeError,
  ],
  [
    'segments 0',
    () => slidingWindow({ permitLimit: 1, window: 1000, segmentsPerWindow: 0 }),
    /slidingWindow: segmentsPerWindow .*got 0/,
    RangeError,
  ],
  [
    'segments too short',
    () => slidingWindow({ permitLimit: 1, window: 10, segmentsPerWindow: 100 }),
    /segments shorter than 1 ms/,
    RangeError,
  ],
  [
    'tokensPerPeriod > limit',
    () => tokenBucket({ tokenLimit: 2, tokensPerPeriod: 3, period: 1000 }),
    /tokensPerPeriod \(3\) must not exceed tokenLimit \(2\)/,
    RangeError,
  ],
  [
    'replenishment',
    () => tokenBucket({ tokenLimit: 2, tokensPerPeriod: 1, period: 1000, replenishment: 'smooth' as never }),
    /replenishment must be one of 'stepped', 'continuous'; got "smooth"/,
    TypeError,
  ],
  [
    'period',
    () => tokenBucket({ tokenLimit: 2, tokensPerPeriod: 1, period: '-1s' as never }),
    /period .*got "-1s"/,
    TypeError,
  ],
  [
    'concurrency limit',
    () => concurrency({ permitLimit: -3 }),
    /concurrency: permitLimit .*got -3/,
    RangeError,
  ],
  [
    'concurrency countRejected',
    () => concurrency({ permitLimit: 1, countRejected: true } as never),
    /countRejected does not apply/,
    TypeError,
  ],
  ['empty chain', () => chain(), /chain: needs at least one limiter/, TypeError],
  ['chain member', () => chain({} as never), /chain: member 0 must be a limiter/, TypeError],
];

for (const [name, build, message, type] of cases) {
  test(`bad option at construction: ${name}`, () => {
    assert.throws(build, (error: unknown) => error instanceof type && message.test((error as Error).message));
  });
}

test("durations accept '500ms', '10s', '1m', '1h'", () => {
  const clock = { now: () => 0 };
  for (const [window, ms] of [
    ['500ms', 500],
    ['10s', 10_000],
    ['1m', 60_000],
    ['1h', 3_600_000],
    ['1.5s', 1500],
  ] as const) {
    const limiter = fixedWindow({ permitLimit: 1, window, clock });
    limiter.tryAcquire();
    assert.equal(limiter.tryAcquire().retryAfterMs, ms);
  }
});

test('the default clock reads performance.now() at each decision', async () => {
  // A window long enough that a slow machine does not see it end between two calls.
  const limiter = fixedWindow({ permitLimit: 1, window: 200 });
  limiter.tryAcquire();
  const before = performance.now();
  const rejected = limiter.tryAcquire();
  assert.equal(rejected.granted, false, 'the window of 200 ms is still open');
  assert.ok(rejected.retryAfterMs! <= 200, `retry within the window; got ${rejected.retryAfterMs}`);
  // Read afresh, never a reading kept from earlier in the turn: the clock is at or past a reading taken before.
  assert.ok(performanceClock.now() >= before, 'performanceClock.now() is monotonic with performance.now()');
  await new Promise((resolve) => setTimeout(resolve, 210));
  assert.equal(limiter.tryAcquire().granted, true, 'a later turn reads the clock again');
});
