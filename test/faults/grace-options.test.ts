import assert from 'node:assert/strict';
import { test } from 'node:test';
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
