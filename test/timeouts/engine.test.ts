import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { RequestTimeoutContext, TimeoutAdapter } from '../../src/http/index.ts';
import { isTimeoutReason, requestTimeouts } from '../../src/http/index.ts';

/** An adapter that answers nothing and records what the engine asked of it. */
function recordingAdapter(): TimeoutAdapter & { expired: RequestTimeoutContext[] } {
  const expired: RequestTimeoutContext[] = [];
  return {
    expired,
    expire: (context) => {
      expired.push(context);
      return 'answered';
    },
    describe: () => ({ route: '/r', method: 'GET' }),
  };
}

describe('options are validated at construction', () => {
  const cases: Array<[string, unknown, RegExp, typeof TypeError | typeof RangeError]> = [
    ['a non-object', 5, /options must be an object; got 5/, TypeError],
    ['an unknown option', { defaults: '1s' }, /unknown option "defaults"/, TypeError],
    [
      'a bad default duration',
      { default: '5 seconds' },
      /default must be a positive duration.*"5 seconds"/,
      TypeError,
    ],
    ['a zero default', { default: 0 }, /default must be a positive duration.*got 0/, TypeError],
    ['a bad policy timeout', { policies: { a: { timeout: -1 } } }, /policies\.a\.timeout.*got -1/, TypeError],
    [
      'an unknown policy key',
      { policies: { a: { timeout: 1, code: 503 } } },
      /policies\.a: unknown option "code"/,
      TypeError,
    ],
    [
      'a 2xx status',
      { default: { timeout: 1, status: 200 } },
      /default\.status must be between 400 and 599; got 200/,
      RangeError,
    ],
    [
      'a fractional status',
      { default: { timeout: 1, status: 504.5 } },
      /default\.status must be an integer/,
      TypeError,
    ],
    [
      'a framing header',
      { default: { timeout: 1, headers: { 'Content-Length': '3' } } },
      /"Content-Length" is set by floodgate/,
      RangeError,
    ],
    [
      'a header with CRLF',
      { default: { timeout: 1, headers: { a: 'x\r\ny: z' } } },
      /default\.headers\.a must be a string without CR/,
      TypeError,
    ],
    [
      'a body of the wrong type',
      { default: { timeout: 1, body: { a: 1 } } },
      /default\.body must be a string or a Uint8Array; got an object/,
      TypeError,
    ],
    [
      'a policy named like a duration',
      { policies: { '10s': '1s' } },
      /"10s" is not a usable policy name/,
      RangeError,
    ],
    ['a policy named default', { policies: { default: '1s' } }, /"default" is reserved/, RangeError],
    [
      'a hook that is not a function',
      { onOverrun: 'log' },
      /onOverrun must be a function; got "log"/,
      TypeError,
    ],
  ];
  for (const [name, options, message, type] of cases) {
    test(name, () => {
      assert.throws(
        () => requestTimeouts(options as never),
        (error: Error) => {
          assert.ok(error instanceof type, `${error.constructor.name}: ${error.message}`);
          assert.match(error.message, message);
          return true;
        },
      );
    });
  }

  test('route settings are checked against the policies', () => {
    const engine = requestTimeouts({ policies: { slow: '30s' } });
    assert.throws(() => engine.route('slwo'), /no timeout policy named "slwo" \(known: "slow"\)/);
    assert.throws(() => engine.route(true), TypeError);
    assert.throws(() => engine.route(null), TypeError);
    assert.throws(() => engine.route(-5), /route timeout must be a positive duration/);
    assert.equal(engine.route('slow').kind, 'named');
    assert.equal(engine.route('2s').kind, 'route');
    assert.equal(engine.route(false).kind, 'disable');
  });

  test('a policy given only a duration inherits the default response field by field', () => {
    const engine = requestTimeouts({
      default: { timeout: '1s', status: 503, body: 'busy', headers: { 'retry-after': '1' } },
      policies: { quick: '100ms', own: { timeout: '2s', status: 500 } },
    });
    const quick = engine.options.policies.get('quick')!;
    assert.equal(quick.status, 503);
    assert.equal(quick.body.toString(), 'busy');
    assert.deepEqual(quick.headers, [
      ['retry-after', '1'],
      ['content-type', 'text/plain; charset=utf-8'],
    ]);
    const own = engine.options.policies.get('own')!;
    assert.equal(own.status, 500);
    assert.equal(own.body.toString(), 'busy');
  });

  test('without options nothing times out', () => {
    const engine = requestTimeouts();
    const context = engine.start(recordingAdapter(), undefined);
    assert.equal(context.deadline, Number.POSITIVE_INFINITY);
    assert.equal(context.policy, undefined);
  });
});

describe('policy resolution', () => {
  const engine = requestTimeouts({ default: '10s', policies: { slow: '20s' } });
  const adapter = recordingAdapter();

  test('route > named > default, whatever the order they are applied in', () => {
    const a = engine.start(adapter, undefined);
    assert.equal(a.policy, 'default');
    assert.equal(a.deadline, a.start + 10_000);
    a.apply(engine.route('5s'));
    a.apply(engine.route('slow'));
    assert.equal(a.policy, 'route');
    assert.equal(a.deadline, a.start + 5000);
    const b = engine.start(adapter, undefined);
    b.apply(engine.route('slow'));
    assert.equal(b.policy, 'slow');
    assert.equal(b.deadline, b.start + 20_000);
    a.disable();
    b.disable();
  });

  test('disabling wins over every policy', () => {
    const a = engine.start(adapter, undefined);
    a.apply(engine.route(false));
    a.apply(engine.route('5s'));
    a.apply(engine.route('slow'));
    assert.equal(a.policy, undefined);
    assert.equal(a.deadline, Number.POSITIVE_INFINITY);
    const b = engine.start(adapter, undefined);
    b.disable();
    b.apply(engine.route('1s'));
    assert.equal(b.deadline, Number.POSITIVE_INFINITY);
  });
});

describe('deadlines', () => {
  test('expire in deadline order, each once, with a TimeoutError; disabled and finished ones never', async () => {
    const engine = requestTimeouts({ default: '60ms', policies: { short: '30ms' } });
    const adapter = recordingAdapter();
    const first = engine.start(adapter, 'first');
    const finished = engine.start(adapter, 'finished');
    const disabled = engine.start(adapter, 'disabled');
    const moved = engine.start(adapter, 'moved');
    // Applied after the others started: its deadline is now the earliest, so it must be inserted before them.
    moved.apply(engine.route('short'));
    disabled.disable();
    finished.responseClosed(true);
    const reasons: unknown[] = [];
    first.signal.addEventListener('abort', () => reasons.push(first.signal.reason));
    await sleep(200);
    assert.deepEqual(
      adapter.expired.map((c) => c.target),
      ['moved', 'first'],
    );
    assert.ok(isTimeoutReason(reasons[0]));
    assert.equal(first.timedOut, true);
    assert.equal(disabled.signal.aborted, false);
    assert.equal(finished.signal.aborted, false);
  });

  test('a signal created after the deadline is born aborted with the same reason', async () => {
    const engine = requestTimeouts({ default: '10ms' });
    const context = engine.start(recordingAdapter(), undefined);
    await sleep(60);
    assert.equal(context.signal.aborted, true);
    assert.equal((context.signal.reason as Error).name, 'TimeoutError');
  });

  test('a disconnect aborts with an AbortError and removes the deadline', async () => {
    const engine = requestTimeouts({ default: '20ms' });
    const adapter = recordingAdapter();
    const context = engine.start(adapter, undefined);
    const { signal } = context;
    context.responseClosed(false);
    assert.equal((signal.reason as Error).name, 'AbortError');
    await sleep(80);
    assert.equal(adapter.expired.length, 0);
  });

  test('onHandlerDone runs once, at once when already done', () => {
    const engine = requestTimeouts({ default: '1s' });
    const context = engine.start(recordingAdapter(), undefined);
    let calls = 0;
    context.onHandlerDone(() => calls++);
    context.responseClosed(true);
    context.handlerDone();
    assert.equal(calls, 1);
    context.onHandlerDone(() => calls++);
    assert.equal(calls, 2);
  });

  test('a throwing hook becomes a process warning, not a crash', async () => {
    const engine = requestTimeouts({
      default: '10ms',
      onTimeout: () => {
        throw new Error('hook failed');
      },
    });
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on('warning', onWarning);
    engine.start(recordingAdapter(), undefined);
    await sleep(80);
    process.off('warning', onWarning);
    assert.equal(warnings[0]?.message, 'hook failed');
  });
});
