import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, mock, test } from 'node:test';
import { requestTimeouts } from '../../src/http/index.ts';

test('graceMs is validated at construction, naming the option and the value', () => {
  assert.throws(() => requestTimeouts({ default: { timeout: '1s', graceMs: -1 } }), {
    name: 'RangeError',
    message: /default\.graceMs must be a finite number of milliseconds ≥ 0; got -1/,
  });
  assert.throws(() => requestTimeouts({ policies: { a: { timeout: '1s', graceMs: '1s' as never } } }), {
    name: 'TypeError',
    message: /policies\.a\.graceMs must be a number of milliseconds; got "1s"/,
  });
});

test('graceMs defaults to 0 and is inherited from the default policy', () => {
  const engine = requestTimeouts({
    default: { timeout: '5s', graceMs: 250 },
    policies: { plain: '1s', own: { timeout: '1s', graceMs: 0 } },
  });
  assert.equal(engine.defaultPolicy?.graceMs, 250);
  assert.equal(engine.options.policies.get('plain')?.graceMs, 250);
  assert.equal(engine.options.policies.get('own')?.graceMs, 0);
  assert.equal(requestTimeouts({ default: '1s' }).defaultPolicy?.graceMs, 0);
});

describe('the grace, on the engine with a mocked clock (performance.now and setTimeout)', () => {
  let now = 0;
  beforeEach(() => {
    now = 0;
    mock.method(performance, 'now', () => now);
    mock.timers.enable({ apis: ['setTimeout'] });
  });
  afterEach(() => {
    mock.timers.reset();
    mock.restoreAll();
  });
  const advance = (ms: number): void => {
    now += ms;
    mock.timers.tick(ms);
  };

  /** An adapter that answers unless the "handler" answered first. */
  function adapter() {
    const calls: Array<{ at: number; result: string }> = [];
    let handlerAnswered = false;
    return {
      calls,
      answer: () => {
        handlerAnswered = true;
      },
      expire: () => {
        const result = handlerAnswered ? ('handler' as const) : ('answered' as const);
        calls.push({ at: now, result });
        return result;
      },
      describe: () => ({ route: undefined, method: undefined }),
    };
  }

  test('the signal aborts at the deadline; the policy answers at deadline + grace', () => {
    const engine = requestTimeouts({ default: { timeout: 100, graceMs: 50 } });
    const a = adapter();
    const context = engine.start(a, undefined);
    const { signal } = context;
    advance(100);
    assert.equal(signal.aborted, true);
    assert.equal((signal.reason as Error).name, 'TimeoutError');
    assert.equal(context.timedOut, true);
    assert.equal(a.calls.length, 0);
    advance(49);
    assert.equal(a.calls.length, 0);
    advance(2);
    assert.deepEqual(
      a.calls.map((c) => c.result),
      ['answered'],
    );
  });

  test("the handler's answer within the grace wins, and is recorded at once", () => {
    const infos: string[] = [];
    const engine = requestTimeouts({
      default: { timeout: 100, graceMs: 500 },
      onTimeout: (info) => infos.push(info.result),
    });
    const a = adapter();
    const context = engine.start(a, undefined);
    advance(101);
    advance(200);
    a.answer();
    context.responseClosed(true);
    assert.deepEqual(a.calls, [{ at: 301, result: 'handler' }]);
    assert.deepEqual(infos, ['handler']);
    advance(1000);
    assert.equal(a.calls.length, 1, 'nothing more at the end of the grace');
  });

  test('a handler that gives up within the grace gets the policy answer then', () => {
    const engine = requestTimeouts({ default: { timeout: 100, graceMs: 500 } });
    const a = adapter();
    const context = engine.start(a, undefined);
    advance(101);
    advance(20);
    context.gaveUp();
    assert.deepEqual(a.calls, [{ at: 121, result: 'answered' }]);
    advance(1000);
    assert.equal(a.calls.length, 1);
  });

  test('without a grace the policy answers at the deadline; the abort reason is built only for a signal', () => {
    const engine = requestTimeouts({ default: 100 });
    const a = adapter();
    const context = engine.start(a, undefined);
    advance(101);
    assert.deepEqual(
      a.calls.map((c) => c.result),
      ['answered'],
    );
    // Read after the fact, the signal is aborted with the same kind of reason.
    assert.equal((context.signal.reason as Error).name, 'TimeoutError');
  });
});
