/**
 * The lease arithmetic (issue 26) under any interleaving: processes decide from their `Batch`, take batches
 * whose requests reach Redis late and whose answers come back later still (or never: a crash), give unspent
 * permits back (demand fell, the window moved on, a refund after the batch ended), freeze for windows and
 * resume with stale batches, crash and start empty; time jumps by anything from nothing to several windows.
 * The invariant: the permits admitted (less those refunded) in any window of a fixed window, and in any run of
 * `segments` consecutive segments of a sliding window, are never above the limit. And with no crash, once
 * every message has arrived and every process has given back what it holds, Redis counts exactly what was
 * admitted in the current window: nothing is stranded.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import type { Algorithm } from '../../src/algorithms/algorithm.ts';
import { FixedWindow } from '../../src/algorithms/fixed-window.ts';
import { SlidingWindow } from '../../src/algorithms/sliding-window.ts';
import { Batch } from '../../src/redis/batch.ts';
import { LeaseModelStore, type TakeReply } from './lease-model.ts';

type Event =
  | { e: 'advance'; ms: number }
  | { e: 'decide'; p: number; n: number }
  | { e: 'exec'; p: number }
  | { e: 'receive'; p: number }
  | { e: 'idle'; p: number }
  | { e: 'refund'; p: number }
  | { e: 'crash'; p: number };

/** A message of one process to Redis, in order: a take (its answer may be lost) or a give-back. */
type Message =
  | { op: 'take'; want: number; need: number; sentAt: number; epoch: number; reply?: TakeReply }
  | { op: 'give'; permits: number; mark: string };

interface Admitted {
  at: number;
  permits: number;
  mark: string;
  refunded: boolean;
}

interface Process {
  batch: Batch;
  /** This process's clock minus the model's (Redis's). */
  offset: number;
  /** Sent, not yet run by Redis. */
  outbox: Message[];
  /** Run by Redis, answer not yet here. */
  inbox: Message[];
  /** A take is in flight (one per key at a time, as the engine sends). */
  taking: boolean;
  /** Bumped by a crash: answers to an older life are lost. */
  epoch: number;
  admitted: Admitted[];
}

const PROCESSES = 3;

function event(windowMs: number): fc.Arbitrary<Event> {
  const p = fc.integer({ min: 0, max: PROCESSES - 1 });
  return fc.oneof(
    {
      weight: 1,
      arbitrary: fc.integer({ min: 0, max: windowMs * 3 }).map((ms) => ({ e: 'advance' as const, ms })),
    },
    {
      weight: 2,
      arbitrary: fc
        .integer({ min: 0, max: Math.floor(windowMs / 4) })
        .map((ms) => ({ e: 'advance' as const, ms })),
    },
    { weight: 2, arbitrary: fc.integer({ min: 0, max: 3 }).map((ms) => ({ e: 'advance' as const, ms })) },
    {
      weight: 12,
      arbitrary: fc.record({ e: fc.constant('decide' as const), p, n: fc.integer({ min: 1, max: 3 }) }),
    },
    { weight: 6, arbitrary: fc.record({ e: fc.constant('exec' as const), p }) },
    { weight: 6, arbitrary: fc.record({ e: fc.constant('receive' as const), p }) },
    { weight: 1, arbitrary: fc.record({ e: fc.constant('idle' as const), p }) },
    { weight: 1, arbitrary: fc.record({ e: fc.constant('refund' as const), p }) },
    { weight: 1, arbitrary: fc.record({ e: fc.constant('crash' as const), p }) },
  );
}

function run(algorithm: Algorithm, events: Event[], offsets: number[]) {
  const store = new LeaseModelStore(algorithm);
  let now = 1000;
  const fresh = (offset: number): Process => ({
    batch: new Batch(algorithm.limit),
    offset,
    outbox: [],
    inbox: [],
    taking: false,
    epoch: 0,
    admitted: [],
  });
  const processes = offsets.map(fresh);
  const admitted: Admitted[] = [];
  let crashed = false;
  const admit = (p: Process, permits: number) => {
    const a = { at: now, permits, mark: p.batch.mark, refunded: false };
    p.admitted.push(a);
    admitted.push(a);
  };
  const give = (p: Process, back: { permits: number; mark: string } | undefined) => {
    if (back) p.outbox.push({ op: 'give', ...back });
  };
  const exec = (p: Process) => {
    const m = p.outbox.shift();
    if (!m) return;
    if (m.op === 'give') store.giveBack(now, m.permits, m.mark);
    else {
      m.reply = store.take(now, m.want, m.need);
      p.inbox.push(m);
    }
  };
  const receive = (p: Process) => {
    const m = p.inbox.shift() as Extract<Message, { op: 'take' }> | undefined;
    if (!m || m.epoch !== p.epoch) return;
    p.taking = false;
    const local = now + p.offset;
    const r = m.reply!;
    if (!r.granted) {
      p.batch.rejected(r.retryMs, local);
      return;
    }
    give(p, p.batch.filled(r.permits, r.mark, r.endMs, r.resetMs, r.remaining, m.sentAt));
    // The decision that asked is served from the batch now.
    if (p.batch.spend(m.need, local)) admit(p, m.need);
  };
  for (const ev of events) {
    if (ev.e === 'advance') {
      now += ev.ms;
      continue;
    }
    const p = processes[ev.p];
    const local = now + p.offset;
    switch (ev.e) {
      case 'decide':
        if (p.batch.denied(local)) break;
        if (p.batch.spend(ev.n, local)) admit(p, ev.n);
        else if (!p.taking) {
          p.taking = true;
          p.outbox.push({
            op: 'take',
            want: p.batch.want(ev.n, local),
            need: ev.n,
            sentAt: local,
            epoch: p.epoch,
          });
        }
        break;
      case 'exec':
        exec(p);
        break;
      case 'receive':
        receive(p);
        break;
      case 'idle':
        give(p, p.batch.idle(local));
        break;
      case 'refund': {
        const a = p.admitted.pop();
        if (!a) break;
        a.refunded = true;
        if (!p.batch.refund(a.permits, a.mark, local)) give(p, { permits: a.permits, mark: a.mark });
        break;
      }
      case 'crash': {
        // What was sent may still run; what the process held is gone (stranded until its window ends).
        crashed = true;
        const next = fresh(p.offset);
        next.epoch = p.epoch + 1;
        next.outbox = p.outbox;
        next.inbox = p.inbox;
        processes[ev.p] = next;
        break;
      }
    }
  }
  return { store, processes, admitted, now, crashed, exec, receive, give };
}

/** Admitted permits (not refunded) per segment index since the anchor. */
function perSegment(admitted: Admitted[], anchor: number, segmentMs: number): Map<number, number> {
  const counts = new Map<number, number>();
  for (const a of admitted) {
    if (a.refunded) continue;
    const i = Math.floor((a.at - anchor) / segmentMs);
    counts.set(i, (counts.get(i) ?? 0) + a.permits);
  }
  return counts;
}

function windowsWithin(counts: Map<number, number>, segments: number, limit: number): void {
  for (const i of counts.keys()) {
    // Every window of `segments` segments that contains segment i.
    for (let end = i; end < i + segments; end++) {
      let total = 0;
      for (let j = end - segments + 1; j <= end; j++) total += counts.get(j) ?? 0;
      assert.ok(total <= limit, `segments ${end - segments + 1}..${end} admitted ${total} > ${limit}`);
    }
  }
}

const cases: [string, Algorithm, number][] = [
  ['fixed window', new FixedWindow(7, 100), 1],
  ['sliding window', new SlidingWindow(9, 120, 3), 3],
  ['sliding window, one segment', new SlidingWindow(5, 50, 1), 1],
];

for (const [name, algorithm, segments] of cases) {
  const windowMs = algorithm.windowMs!;
  const offsets = fc.array(fc.integer({ min: -1e6, max: 1e6 }), {
    minLength: PROCESSES,
    maxLength: PROCESSES,
  });

  test(`${name}: any interleaving of takes, spends, give-backs, refunds, freezes and crashes admits ≤ limit per window`, () => {
    fc.assert(
      fc.property(
        fc.array(event(windowMs), { minLength: 50, maxLength: 400, size: 'max' }),
        offsets,
        (events, offs) => {
          const { store, admitted } = run(algorithm, events, offs);
          windowsWithin(perSegment(admitted, store.anchor, windowMs / segments), segments, algorithm.limit);
        },
      ),
      { numRuns: 1000 },
    );
  });

  test(`${name}: with no crash, once every message arrived and every batch is given back, Redis counts exactly what was admitted`, () => {
    fc.assert(
      fc.property(
        fc.array(event(windowMs), { minLength: 50, maxLength: 300, size: 'max' }),
        offsets,
        (events, offs) => {
          const r = run(
            algorithm,
            events.filter((e) => e.e !== 'crash'),
            offs,
          );
          // Quiesce at this instant: every take runs and is answered, then every batch is given back.
          for (const p of r.processes) {
            while (p.outbox.length > 0 || p.inbox.length > 0) {
              r.exec(p);
              r.receive(p);
            }
          }
          for (const p of r.processes) {
            r.give(p, p.batch.takeAll());
            while (p.outbox.length > 0) r.exec(p);
          }
          if (!r.store.started) return;
          const counts = perSegment(r.admitted, r.store.anchor, windowMs / segments);
          const current = Math.floor((r.now - r.store.anchor) / (windowMs / segments));
          let inWindow = 0;
          for (let j = current - segments + 1; j <= current; j++) inWindow += counts.get(j) ?? 0;
          assert.equal(r.store.counted(r.now), inWindow);
        },
      ),
      { numRuns: 1000 },
    );
  });
}

test('a batch taken just before its window ends is void at that end on this process clock, however late the answer', () => {
  const store = new LeaseModelStore(new FixedWindow(10, 100));
  const batch = new Batch(10);
  store.take(0, 1, 1); // anchors the window at 0
  const sentAt = 5_000_090; // this process's clock, 90 ms into Redis's window
  const reply = store.take(95, 5, 1) as Extract<TakeReply, { granted: true }>;
  // The answer arrives 40 ms after it was sent (a pause): the window ended at Redis time 100.
  batch.filled(reply.permits, reply.mark, reply.endMs, reply.resetMs, reply.remaining, sentAt);
  assert.equal(batch.spend(1, sentAt + 4), true, 'live before the end');
  assert.equal(batch.spend(1, sentAt + 5), false, 'void from sentAt + (end − time the script ran)');
});

test('batch sizes follow demand: doubling while it is hot, back to one when it cools', () => {
  const batch = new Batch(1000);
  let now = 0;
  const sizes: number[] = [];
  for (let i = 0; i < 12; i++) {
    const want = batch.want(1, now);
    sizes.push(want);
    batch.filled(want, 'm', 1000, 1000, 0, now);
    for (let k = 0; k < want; k++) assert.ok(batch.spend(1, now + 1));
    now += 2;
  }
  assert.deepEqual(sizes.slice(0, 6), [1, 2, 4, 8, 16, 32]);
  // Idle for a second, then a request now and then: the batch shrinks to one permit.
  now += 1000;
  batch.filled(batch.want(1, now), 'n', 1000, 1000, 0, now);
  batch.spend(1, now);
  now += 1000;
  assert.equal(batch.want(1, now), 1);
});

test('a refused take keeps the batch size: the next window starts where the demand was, not at one permit', () => {
  const batch = new Batch(1000);
  let now = 0;
  let want = 0;
  for (let i = 0; i < 8; i++) {
    want = batch.want(1, now);
    batch.filled(want, 'm', 1000, 1000, 0, now);
    for (let k = 0; k < want; k++) assert.ok(batch.spend(1, now + 1));
    now += 2;
  }
  assert.equal(want, 128);
  // The window is spent: the next take is refused, and the key is denied here until the window's end.
  const refusedSize = batch.want(1, now);
  batch.rejected(500, now);
  now += 500;
  // Nothing could be spent meanwhile: that is no measure of the demand.
  assert.equal(batch.want(1, now), refusedSize);
});

test("a take late in a batch's window asks only for the demand of the time left: none stranded at its end", () => {
  const batch = new Batch(10_000);
  let now = 0;
  let want = 0;
  for (let i = 0; i < 10; i++) {
    want = batch.want(1, now);
    batch.filled(want, 'm', 100 - now, 1000, 0, now); // one window: void at 100
    for (let k = 0; k < want; k++) assert.ok(batch.spend(1, now + 1));
    now += 2;
  }
  // 10 ms before the end: a fifth of BATCH_TARGET_MS's worth of the demand.
  now = 90;
  for (let k = 0; k < 5; k++) batch.spend(1, now);
  const late = batch.want(1, now);
  assert.ok(late <= Math.ceil(batch.size / 5), `${late} asked with 10 ms left, size ${batch.size}`);
});
