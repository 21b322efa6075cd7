/**
 * The dispatcher without a server: a decision issued while none is in flight goes at once, the others issued in
 * one tick share one script call per slot, in order; a call that does not answer in time fails every decision
 * in it with StoreUnavailableError, and a late answer is ignored; a failure becomes StoreUnavailableError too.
 * The request encoding: short form for the common request.
 */
import assert from 'node:assert/strict';
import { type AddressInfo, connect, createServer } from 'node:net';
import { test } from 'node:test';
import v8 from 'node:v8';
import vm from 'node:vm';
import type { ScriptRunner } from '../../src/redis/client.ts';
import { Dispatcher } from '../../src/redis/dispatcher.ts';
import { encodeRequest, type MemberCall, type Op } from '../../src/redis/protocol.ts';
import { StoreUnavailableError } from '../../src/redis/request.ts';
import { keySlot } from '../../src/redis/slot.ts';

interface Call {
  keys: readonly string[];
  args: readonly string[];
  answer(reply: unknown): void;
  fail(error: unknown): void;
}

function fakeRunner(cluster: boolean): ScriptRunner & { calls: Call[] } {
  const calls: Call[] = [];
  return {
    cluster,
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
}

test('a decision issued while nothing is in flight goes at once; the rest of its tick follows in one call, in order', async () => {
  const runner = fakeRunner(false);
  const dispatcher = new Dispatcher(runner, 1000, true);
  const replies = [0, 1, 2].map((i) => dispatcher.request([`k${i}`], ['t', '1', '1', '', `a${i}`]));
  assert.deepEqual(
    runner.calls.map((c) => c.keys),
    [['k0']],
    'the first is not held back until the end of the tick',
  );
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(
    runner.calls.map((c) => c.keys),
    [['k0'], ['k1', 'k2']],
  );
  assert.deepEqual(runner.calls[1].args.slice(0, 6), ['2', 't', '1', '1', '', 'a1']);
  runner.calls[0].answer('r0');
  runner.calls[1].answer('r1,x;r2');
  assert.deepEqual(await Promise.all(replies), ['r0', 'r1,x', 'r2']);
  // Answered, nothing is in flight again: the next decision goes at once too.
  const again = dispatcher.request(['k3'], ['t']);
  assert.equal(runner.calls.length, 3);
  runner.calls[2].answer('r3');
  assert.equal(await again, 'r3');
});

test('a tick with many decisions is split so Redis decides one part while the next is gathered', async () => {
  const runner = fakeRunner(false);
  const dispatcher = new Dispatcher(runner, 1000, true);
  const replies = Array.from({ length: 40 }, (_, i) => dispatcher.request([`k${i}`], ['fw:1:1::0:1:1']));
  // The first goes at once (nothing in flight); then a part goes as soon as it is as large as what Redis is
  // deciding (and at least 16); the rest at the tick's end.
  assert.deepEqual(
    runner.calls.map((c) => c.keys.length),
    [1, 16, 17],
  );
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(
    runner.calls.map((c) => c.keys.length),
    [1, 16, 17, 6],
  );
  assert.deepEqual(
    runner.calls.flatMap((c) => c.keys),
    Array.from({ length: 40 }, (_, i) => `k${i}`),
    'in the order they were asked',
  );
  for (const c of runner.calls) c.answer(c.keys.map((k) => `r${k}`).join(';'));
  assert.deepEqual(
    await Promise.all(replies),
    Array.from({ length: 40 }, (_, i) => `rk${i}`),
  );
});

test('in Cluster mode a tick is split per slot; without coalescing every decision is its own call', async () => {
  const runner = fakeRunner(true);
  const dispatcher = new Dispatcher(runner, 1000, true);
  const keys = ['{a}x', '{b}x', '{a}y'];
  assert.notEqual(keySlot(keys[0]), keySlot(keys[1]));
  // One decision in flight already: the whole tick is gathered.
  const first = dispatcher.request(['{c}z'], ['t']);
  const replies = keys.map((k) => dispatcher.request([k], ['t']));
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(
    runner.calls.map((c) => c.keys),
    [['{c}z'], ['{a}x', '{a}y'], ['{b}x']],
  );
  runner.calls[0].answer('c1');
  runner.calls[1].answer('a1;a2');
  runner.calls[2].answer('b1');
  assert.equal(await first, 'c1');
  assert.deepEqual(await Promise.all(replies), ['a1', 'b1', 'a2']);
  const single = fakeRunner(false);
  const plain = new Dispatcher(single, 1000, false);
  plain.request(['x'], ['t']).catch(() => {});
  plain.request(['y'], ['t']).catch(() => {});
  assert.equal(single.calls.length, 2);
});

test('an answered call keeps none of its decisions alive while older calls are still in flight', async () => {
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc') as () => void;
  const runner = fakeRunner(false);
  const dispatcher = new Dispatcher(runner, 2_000, false);
  // The oldest call never answers: the calls in flight are never empty, as under steady load.
  dispatcher.request(['stuck'], ['t']).catch(() => {});
  // Sent from a function of their own, so that no register of this (suspended) test holds the last one.
  const answered = sendMany(dispatcher, 50);
  for (const call of runner.calls.slice(1)) call.answer('ok');
  await new Promise((r) => setImmediate(r));
  gc();
  const alive = answered.filter((r) => r.deref() !== undefined).length;
  assert.equal(alive, 0, `${alive} of 50 answered decisions still reachable`);
});

function sendMany(dispatcher: Dispatcher, count: number): WeakRef<object>[] {
  const refs: WeakRef<object>[] = [];
  for (let i = 0; i < count; i++) {
    const request = {
      key: `k${i}`,
      keysTo: (out: string[]) => out.push(`k${i}`),
      argsTo: (out: string[]) => out.push('t'),
      answer: () => {},
      fail: () => {},
    };
    refs.push(new WeakRef(request));
    dispatcher.send(request);
  }
  return refs;
}

test('a call past its deadline fails its decisions with StoreUnavailableError; a late answer is ignored', async () => {
  const runner = fakeRunner(false);
  const dispatcher = new Dispatcher(runner, 20, true);
  const reply = dispatcher.request(['k'], ['t']);
  await assert.rejects(
    reply,
    (error: unknown) => error instanceof StoreUnavailableError && /20 ms/.test(String(error)),
  );
  runner.calls[0].answer('late');
  const failing = dispatcher.request(['k'], ['t']);
  await new Promise((r) => setImmediate(r));
  runner.calls[1].fail(new Error('Connection is closed.'));
  await assert.rejects(
    failing,
    (error: unknown) => error instanceof StoreUnavailableError && /Connection is closed/.test(String(error)),
  );
});

test('the common request goes in short form (one argument per member, a lone lease in 4–5); anything else in full', () => {
  const lone = { key: 'k', spec: 'fw:5:1000::0:1000:30000', origin: '', blocked: false, lease: '' };
  const args: string[] = [];
  encodeRequest(args, 't', 2, '', [lone]);
  encodeRequest(args, 'w', 1, '17', [lone]);
  assert.deepEqual(args, ['T', '2', '', lone.spec, 'W', '1', '17', lone.spec]);
  const full = (op: Op, members: MemberCall[]) => {
    const out: string[] = [];
    encodeRequest(out, op, 1, '', members);
    return out.slice(0, 4);
  };
  assert.deepEqual(full('t', [{ ...lone, origin: '5' }]), ['t', '1', '1', ''], 'an origin');
  assert.deepEqual(full('w', [{ ...lone, blocked: true }]), ['w', '1', '1', ''], 'blocked');
  assert.deepEqual(
    full('t', [{ ...lone, lease: '1:a', origin: '5' }]),
    ['t', '1', '1', ''],
    'a lease, an origin',
  );
  const leases: string[] = [];
  const leased = { ...lone, lease: '1:a' };
  encodeRequest(leases, 't', 1, '', [leased]);
  encodeRequest(leases, 'w', 2, '9', [leased]);
  encodeRequest(leases, 'x', 0, '', [leased]);
  encodeRequest(leases, 'n', 0, '9', [leased]);
  assert.deepEqual(
    leases,
    [
      'K',
      '1',
      '',
      lone.spec,
      '1:a',
      'Q',
      '2',
      '9',
      lone.spec,
      '1:a',
      'X',
      '',
      lone.spec,
      '1:a',
      'N',
      '9',
      lone.spec,
      '1:a',
    ],
    'a lone lease acquired, waited for, released, renewed: in short',
  );
  assert.deepEqual(full('p', [lone]), ['p', '1', '1', ''], 'a peek');
  assert.deepEqual(full('t', [lone, { ...lone, lease: '1:a' }]), ['t', '1', '2', ''], 'a chain with a lease');
  const chain: string[] = [];
  encodeRequest(chain, 'w', 1, '', [lone, { ...lone, spec: 'tb:3:1:1000:0:1000:30000' }]);
  assert.deepEqual(chain, ['D', '1', '', '2', lone.spec, 'tb:3:1:1000:0:1000:30000'], 'a chain in short');
  const one: string[] = [];
  encodeRequest(one, 't', 1, '', [lone]);
  encodeRequest(one, 't', 1, '', [lone, lone]);
  assert.deepEqual(one, [lone.spec, 'B', '2', lone.spec, lone.spec], 'one permit on Redis time, shortest');
});

test('deadlines hold whatever order the answers come in: a later call answered first, the earlier one late', async () => {
  const runner = fakeRunner(false);
  const dispatcher = new Dispatcher(runner, 30, false);
  const first = dispatcher.request(['a'], ['t']);
  const second = dispatcher.request(['b'], ['t']);
  runner.calls[1].answer('b answered');
  assert.equal(await second, 'b answered');
  await assert.rejects(
    first,
    (error: unknown) => error instanceof StoreUnavailableError && /30 ms/.test(String(error)),
    'the unanswered call still fails at its deadline',
  );
  const third = dispatcher.request(['c'], ['t']);
  runner.calls[2].answer('c answered');
  assert.equal(await third, 'c answered', 'calls after a timeout are answered as usual');
  const fourth = dispatcher.request(['d'], ['t']);
  await assert.rejects(fourth, StoreUnavailableError, 'and keep their own deadline');
});

test('a reply already come when the deadline timer fires is an answer, not a timeout', async () => {
  // A real socket carries the reply: written before this process gets back to its event loop, read only in
  // the loop's poll phase, which comes after its timers.
  let written: () => void = () => {};
  const wrote = new Promise<void>((r) => {
    written = r;
  });
  const server = createServer((socket) => {
    socket.once('data', () => socket.write('answered', () => written()));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const client = connect((server.address() as AddressInfo).port, '127.0.0.1');
  await new Promise((r) => client.once('connect', r));
  const runner: ScriptRunner = {
    cluster: false,
    run(_script, _numKeys, _keysAndArgs, onReply) {
      client.once('data', (data) => onReply(data.toString()));
      client.write('decide');
    },
  };
  try {
    const dispatcher = new Dispatcher(runner, 20, false);
    const reply = dispatcher.request(['k'], ['t']);
    // Wait for the server to have written (its reply is in this socket's kernel buffer)...
    await wrote;
    // ...then keep this process busy past the deadline, as a burst being encoded would.
    const busyUntil = performance.now() + 60;
    while (performance.now() < busyUntil) {}
    assert.equal(await reply, 'answered');
  } finally {
    client.destroy();
    server.close();
  }
});

test('a burst Redis cannot decide in time is shed newest first: calls go in the order asked, answered in turn', async () => {
  const runner = fakeRunner(false);
  const dispatcher = new Dispatcher(runner, 30, true);
  const settled: string[] = [];
  const replies = Array.from({ length: 40 }, (_, i) =>
    dispatcher.request([`k${i}`], ['t']).then(
      (r) => settled.push(`${i}:${r}`),
      () => settled.push(`${i}:shed`),
    ),
  );
  await new Promise((r) => setImmediate(r));
  // Redis (one thread, calls in the order sent) decides the first two calls before the deadline, not the rest.
  runner.calls[0].answer('a');
  runner.calls[1].answer(runner.calls[1].keys.map(() => 'b').join(';'));
  await Promise.all(replies);
  const shed = settled.filter((s) => s.endsWith(':shed')).map((s) => Number(s.split(':')[0]));
  assert.deepEqual(
    shed,
    Array.from({ length: 40 - 17 }, (_, i) => 17 + i),
    'the 23 newest are shed',
  );
});

test('in Cluster, a call refused with TRYAGAIN is split: each decision resent alone in its deadline, the slot sent singly for a while', async () => {
  const runner = fakeRunner(true);
  const dispatcher = new Dispatcher(runner, 1000, true);
  const first = dispatcher.request(['{s}a'], ['t']);
  const batch = ['{s}b', '{s}c', '{s}d'].map((k) => dispatcher.request([k], ['t']));
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(
    runner.calls.map((c) => c.keys),
    [['{s}a'], ['{s}b', '{s}c', '{s}d']],
  );
  runner.calls[0].answer('a');
  runner.calls[1].fail(new Error('TRYAGAIN Multiple keys request during rehashing of slot'));
  assert.deepEqual(
    runner.calls.slice(2).map((c) => c.keys),
    [['{s}b'], ['{s}c'], ['{s}d']],
    'resent one per call',
  );
  runner.calls[2].answer('b');
  // ioredis' form, once its own retries are spent: resent again (alone, it follows ASK).
  runner.calls[3].fail(
    new Error('Too many Cluster redirections. Last error: ReplyError: MOVED 1 127.0.0.1:1'),
  );
  runner.calls[4].answer('d');
  await new Promise((r) => setTimeout(r, 20));
  assert.deepEqual(runner.calls[5].keys, ['{s}c'], 'retried after TRYAGAIN_MS');
  runner.calls[5].answer('c');
  assert.deepEqual([await first, ...(await Promise.all(batch))], ['a', 'b', 'c', 'd']);
  // The slot is unstable now: a tick's decisions for it go one per call, though others are in flight.
  const keep = dispatcher.request(['{other}x'], ['t']);
  const more = ['{s}e', '{s}f'].map((k) => dispatcher.request([k], ['t']));
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(
    runner.calls.slice(6).map((c) => c.keys),
    [['{other}x'], ['{s}e'], ['{s}f']],
  );
  for (const c of runner.calls.slice(6)) c.answer(c.keys[0]);
  assert.deepEqual([await keep, ...(await Promise.all(more))], ['{other}x', '{s}e', '{s}f']);
});

test('once every call is answered no deadline timer is left: a store does not hold the process open for timeoutMs', async () => {
  const runner = fakeRunner(false);
  const dispatcher = new Dispatcher(runner, 60_000, true);
  const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
  const idle = timers();
  const replies = [0, 1, 2].map((i) => dispatcher.request([`k${i}`], ['t']));
  await new Promise((r) => setImmediate(r));
  assert.equal(timers(), idle + 1, 'one timer keeps the deadlines of the calls in flight');
  runner.calls[0].answer('r0');
  assert.equal(timers(), idle + 1, 'a call is still in flight');
  runner.calls[1].answer('r1;r2');
  await Promise.all(replies);
  assert.equal(timers(), idle, 'nothing in flight: no timer');
  // The next call arms it again, and its deadline still holds.
  const late = new Dispatcher(runner, 20, true);
  const failed = late.request(['k4'], ['t']);
  await assert.rejects(failed, StoreUnavailableError);
});
