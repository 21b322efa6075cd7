/**
 * The engine over a stub runner (no server): where a failure's skip applies — the node that failed (as the
 * client's slot map names it), else the slot, else the one node without Cluster.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { fixedWindow } from '../../src/index.ts';
import type { Binding } from '../../src/redis/binding.ts';
import type { ScriptRunner } from '../../src/redis/client.ts';
import { Engine } from '../../src/redis/engine.ts';
import { type RedisStoreOptions, resolveOptions } from '../../src/redis/options.ts';
import { keySlot } from '../../src/redis/slot.ts';
import { isUnavailableAnswer } from '../../src/redis/unavailable.ts';

export interface StubCall {
  keys: readonly string[];
  args: readonly string[];
  answer(reply: unknown): void;
  fail(error: unknown): void;
}

/** A runner that records each call and answers only when told. */
export function stubRunner(cluster: boolean, nodeOf?: (slot: number) => string | undefined) {
  const calls: StubCall[] = [];
  const runner: ScriptRunner & { calls: StubCall[] } = {
    cluster,
    nodeOf,
    calls,
    run(_script, numKeys, keysAndArgs, onReply, onError) {
      calls.push({
        keys: keysAndArgs.slice(0, numKeys),
        args: keysAndArgs.slice(numKeys),
        answer: onReply,
        fail: onError,
      });
    },
  };
  return runner;
}

export function engineOn(runner: ScriptRunner, options: Omit<RedisStoreOptions, 'client'>): Engine {
  return new Engine(runner, resolveOptions({ client: {} as never, ...options }));
}

const spec = fixedWindow({ permitLimit: 10, window: 60_000 });
export function bindingOf(key: string): Binding {
  const owner = { name: 'l', granted: 0, rejected: 0 };
  return {
    members: [{ key, spec, origin: '', owner, partKey: undefined, leased: false }],
    partKey: undefined,
    chain: false,
  };
}

/** Keys `{tag}` whose slots fall below and above 8192. */
function keysBySide(): { low: string[]; high: string[] } {
  const low: string[] = [];
  const high: string[] = [];
  for (let i = 0; low.length < 2 || high.length < 1; i++) {
    const key = `{k${i}}`;
    const side = keySlot(key) < 8192 ? low : high;
    if (side.length < 2 && (side.length === 0 || keySlot(side[0]) !== keySlot(key))) side.push(key);
  }
  return { low, high };
}

test('a failure skips Redis for the keys of the node that failed only, whatever their slot', async () => {
  const runner = stubRunner(true, (slot) => (slot < 8192 ? '127.0.0.1:1' : '127.0.0.1:2'));
  const engine = engineOn(runner, {
    timeoutMs: 60_000,
    retryIntervalMs: 60_000,
    onUnavailable: 'fail-closed',
  });
  const { low, high } = keysBySide();
  const failing = engine.decideLease(bindingOf(low[0]), 1, 'limit');
  runner.calls[0].fail(new Error('Connection is closed.'));
  assert.ok(isUnavailableAnswer(await failing), 'the failed decision: onUnavailable');
  const sibling = await engine.decideLease(bindingOf(low[1]), 1, 'limit');
  assert.ok(isUnavailableAnswer(sibling), 'another slot of the failed node skips Redis');
  assert.equal(runner.calls.length, 1);
  const healthy = engine.decideLease(bindingOf(high[0]), 1, 'limit');
  assert.equal(runner.calls.length, 2, 'a key on the healthy node goes to Redis');
  runner.calls[1].answer('1,9,60000');
  assert.ok(!isUnavailableAnswer(await healthy));
  assert.equal(engine.unavailable, 2);
});

test('without a slot map the skip is the slot; without Cluster it is the one node', async () => {
  const { low } = keysBySide();
  const cluster = stubRunner(true);
  const engine = engineOn(cluster, { timeoutMs: 60_000, retryIntervalMs: 60_000 });
  const failing = engine.decideLease(bindingOf(low[0]), 1, 'limit');
  cluster.calls[0].fail(new Error('down'));
  await failing;
  const other = engine.decideLease(bindingOf(low[1]), 1, 'limit');
  assert.equal(cluster.calls.length, 2, 'another slot goes to Redis');
  cluster.calls[1].answer('1,9,60000');
  assert.ok(!isUnavailableAnswer(await other));
  assert.ok(isUnavailableAnswer(await engine.decideLease(bindingOf(low[0]), 1, 'limit')), 'the slot skips');

  const single = stubRunner(false);
  const one = engineOn(single, { timeoutMs: 60_000, retryIntervalMs: 60_000 });
  const first = one.decideLease(bindingOf(low[0]), 1, 'limit');
  single.calls[0].fail(new Error('down'));
  await first;
  assert.ok(isUnavailableAnswer(await one.decideLease(bindingOf(low[1]), 1, 'limit')));
  assert.equal(single.calls.length, 1);
});

test('a Cluster call over several keys that misses its deadline skips nothing: the slot goes one decision per call', async () => {
  const runner = stubRunner(true, () => '127.0.0.1:1');
  const engine = engineOn(runner, { timeoutMs: 30, retryIntervalMs: 60_000, onUnavailable: 'fail-closed' });
  const { low } = keysBySide();
  const tag = (k: string) => `${k}x`; // same slot as k, another key
  const first = engine.decideLease(bindingOf(low[0]), 1, 'limit');
  const batch = [
    engine.decideLease(bindingOf(tag(low[0])), 1, 'limit'),
    engine.decideLease(bindingOf(`${low[0]}y`), 1, 'limit'),
  ];
  runner.calls[0].answer('1,9,60000');
  await first;
  await new Promise((r) => setImmediate(r));
  assert.equal(
    runner.calls[1]?.keys.length,
    2,
    `one call over two keys: ${JSON.stringify(runner.calls.map((c) => c.keys))}`,
  );
  // It never answers (a client retrying TRYAGAIN past the deadline).
  assert.ok((await Promise.all(batch)).every((l) => isUnavailableAnswer(l)));
  const next = engine.decideLease(bindingOf(low[1]), 1, 'limit');
  assert.equal(runner.calls.length, 3, 'the node is not skipped');
  runner.calls[2].answer('1,9,60000');
  assert.ok(!isUnavailableAnswer(await next));
  // A lone call that misses its deadline does open the skip (a node down looks like this).
  const lone = engine.decideLease(bindingOf(low[1]), 1, 'limit');
  assert.equal(runner.calls.length, 4);
  await lone;
  assert.ok(isUnavailableAnswer(await engine.decideLease(bindingOf(low[0]), 1, 'limit')));
  assert.equal(runner.calls.length, 4, 'skipped');
});

test('a call that misses its deadline while a later call to its node was answered skips nothing (the node is up)', async () => {
  const runner = stubRunner(false);
  const engine = engineOn(runner, {
    timeoutMs: 30,
    retryIntervalMs: 60_000,
    onUnavailable: 'fail-closed',
    coalesce: false,
  });
  const late = engine.decideLease(bindingOf('{a}'), 1, 'limit');
  const later = engine.decideLease(bindingOf('{b}'), 1, 'limit');
  runner.calls[1].answer('1,9,60000');
  assert.ok(!isUnavailableAnswer(await later));
  assert.ok(isUnavailableAnswer(await late), 'the late one: onUnavailable');
  const next = engine.decideLease(bindingOf('{a}'), 1, 'limit');
  assert.equal(runner.calls.length, 3, 'not skipped');
  runner.calls[2].answer('1,9,60000');
  assert.ok(!isUnavailableAnswer(await next));
});
