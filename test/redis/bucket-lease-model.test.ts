/**
 * A token bucket's lease arithmetic (issue 26) under any interleaving: processes decide from their `Batch`, send
 * takes (handing their batch back with each) whose requests reach Redis late and whose answers come back later
 * still (or never: a crash), give idle batches back, refund grants to Redis, freeze past their batch's life and
 * crash; time jumps by anything from nothing to several refills.
 *
 * The bound: over any span [s, e], the tokens admitted are at most what the bucket allows — `tokenLimit`, plus
 * its refills in (s, e], plus the tokens refunded in [s, e] — plus the reserve, the most Redis lets all batches
 * hold together. A request that sent a take is counted when Redis runs it (as a strict decision is counted
 * when Redis decides it); a token spent from a batch, when the process spends it.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { TokenBucket } from '../../src/algorithms/token-bucket.ts';
import { Batch } from '../../src/redis/batch.ts';
import { BucketLeaseModel, type TakeReply } from './lease-model.ts';

type Event =
  | { e: 'advance'; ms: number }
  | { e: 'decide'; p: number; n: number }
  | { e: 'burst'; p: number; k: number }
  | { e: 'exec'; p: number }
  | { e: 'receive'; p: number }
  | { e: 'idle'; p: number }
  | { e: 'refund'; p: number }
  | { e: 'crash'; p: number };

type Message =
  | { op: 'take'; want: number; need: number; back: number; sentAt: number; epoch: number; reply?: TakeReply }
  | { op: 'give'; back: number }
  | { op: 'refund'; n: number };

interface Process {
  id: string;
  batch: Batch;
  offset: number;
  outbox: Message[];
  inbox: Message[];
  taking: boolean;
  epoch: number;
  /** Grants not yet refunded (their token counts). */
  grants: number[];
}

const PROCESSES = 3;
const HOLD_MS = 500;

function event(periodMs: number): fc.Arbitrary<Event> {
  const p = fc.integer({ min: 0, max: PROCESSES - 1 });
  return fc.oneof(
    {
      weight: 1,
      arbitrary: fc.integer({ min: 0, max: HOLD_MS * 2 }).map((ms) => ({ e: 'advance' as const, ms })),
    },
    {
      weight: 2,
      arbitrary: fc.integer({ min: 0, max: periodMs }).map((ms) => ({ e: 'advance' as const, ms })),
    },
    { weight: 2, arbitrary: fc.integer({ min: 0, max: 3 }).map((ms) => ({ e: 'advance' as const, ms })) },
    {
      weight: 12,
      arbitrary: fc.record({ e: fc.constant('decide' as const), p, n: fc.integer({ min: 1, max: 3 }) }),
    },
    {
      weight: 3,
      arbitrary: fc.record({ e: fc.constant('burst' as const), p, k: fc.integer({ min: 2, max: 30 }) }),
    },
    { weight: 6, arbitrary: fc.record({ e: fc.constant('exec' as const), p }) },
    { weight: 6, arbitrary: fc.record({ e: fc.constant('receive' as const), p }) },
    { weight: 1, arbitrary: fc.record({ e: fc.constant('idle' as const), p }) },
    { weight: 1, arbitrary: fc.record({ e: fc.constant('refund' as const), p }) },
    { weight: 1, arbitrary: fc.record({ e: fc.constant('crash' as const), p }) },
  );
}

function run(bucket: TokenBucket, reserve: number, events: Event[], offsets: number[]) {
  const redis = new BucketLeaseModel(bucket, reserve, HOLD_MS);
  let now = 1000;
  let lives = 0;
  const fresh = (offset: number): Process => ({
    id: `p${lives++}`,
    batch: new Batch(bucket.limit),
    offset,
    outbox: [],
    inbox: [],
    taking: false,
    epoch: 0,
    grants: [],
  });
  const processes = offsets.map(fresh);
  const admitted: { at: number; n: number }[] = [];
  const refunded: { at: number; n: number }[] = [];
  const exec = (p: Process) => {
    const m = p.outbox.shift();
    if (!m) return;
    if (m.op === 'give') redis.op(now, p.id, m.back);
    else if (m.op === 'refund') {
      redis.refund(now, m.n);
      refunded.push({ at: now, n: m.n });
    } else {
      m.reply = redis.op(now, p.id, m.back, { want: m.want, need: m.need });
      // The request that asked is counted when Redis grants it (served when the answer arrives, if in time).
      if (m.reply!.granted) admitted.push({ at: now, n: m.need });
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
    const back = p.batch.filled(r.permits, r.mark, r.endMs, r.resetMs, r.remaining, m.sentAt);
    assert.equal(back, undefined, 'a bucket batch is emptied when its take is sent');
    if (p.batch.spend(m.need, local)) p.grants.push(m.need);
  };
  const queue = [...events];
  for (let ev = queue.shift(); ev !== undefined; ev = queue.shift()) {
    if (ev.e === 'advance') {
      now += ev.ms;
      continue;
    }
    if (ev.e === 'burst') {
      // k decisions of one token at this instant, each take run and answered at once: a hot process.
      const p = ev.p;
      const burst: Event[] = [];
      for (let i = 0; i < ev.k; i++)
        burst.push({ e: 'decide', p, n: 1 }, { e: 'exec', p }, { e: 'receive', p });
      queue.unshift(...burst);
      continue;
    }
    const p = processes[ev.p];
    const local = now + p.offset;
    switch (ev.e) {
      case 'decide':
        if (p.batch.denied(local)) break;
        if (p.batch.spend(ev.n, local)) {
          admitted.push({ at: now, n: ev.n });
          p.grants.push(ev.n);
        } else if (!p.taking) {
          p.taking = true;
          const want = p.batch.want(ev.n, local);
          const back = p.batch.takeAll()?.permits ?? 0;
          p.outbox.push({ op: 'take', want, need: ev.n, back, sentAt: local, epoch: p.epoch });
        }
        break;
      case 'exec':
        exec(p);
        break;
      case 'receive':
        receive(p);
        break;
      case 'idle': {
        const back = p.batch.idle(local);
        if (back) p.outbox.push({ op: 'give', back: back.permits });
        break;
      }
      case 'refund': {
        const n = p.grants.pop();
        if (n !== undefined) p.outbox.push({ op: 'refund', n });
        break;
      }
      case 'crash': {
        // What was sent may still run; what the process held is gone. A new life is a new holder.
        const next = fresh(p.offset);
        next.epoch = p.epoch + 1;
        next.outbox = p.outbox;
        next.inbox = p.inbox;
        // The old life's messages still run under its own name.
        next.id = p.id;
        processes[ev.p] = next;
        break;
      }
    }
  }
  return { redis, admitted, refunded };
}

/** The worst of (admitted − what the bucket allows) over every span between two admissions. */
function worstOvershoot(
  bucket: TokenBucket,
  anchor: number,
  admitted: { at: number; n: number }[],
  refunded: { at: number; n: number }[],
): number {
  const sorted = [...admitted].sort((x, y) => x.at - y.at);
  let worst = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < sorted.length; i++) {
    const s = sorted[i].at;
    let total = 0;
    for (let j = i; j < sorted.length; j++) {
      total += sorted[j].n;
      const e = sorted[j].at;
      if (j + 1 < sorted.length && sorted[j + 1].at === e) continue;
      const refills =
        bucket.replenishment === 'continuous'
          ? (bucket.tokensPerPeriod / bucket.periodMs) * (e - s)
          : bucket.tokensPerPeriod *
            (Math.floor((e - anchor) / bucket.periodMs) - Math.floor((s - anchor) / bucket.periodMs));
      let back = 0;
      for (const r of refunded) if (r.at >= s && r.at <= e) back += r.n;
      worst = Math.max(worst, total - (bucket.limit + refills + back));
    }
  }
  return worst;
}

const cases: [string, TokenBucket, number][] = [
  ['stepped', new TokenBucket(20, 10, 50, 'stepped'), 3],
  ['continuous', new TokenBucket(15, 1, 5, 'continuous'), 4],
  ['stepped, no reserve', new TokenBucket(12, 6, 40, 'stepped'), 0],
];

for (const [name, bucket, reserve] of cases) {
  const offsets = fc.array(fc.integer({ min: -1e6, max: 1e6 }), {
    minLength: PROCESSES,
    maxLength: PROCESSES,
  });

  test(`token bucket (${name}): any interleaving of takes, give-backs, refunds, refills, freezes and crashes admits ≤ what the bucket allows + the reserve (${reserve}) over any span`, () => {
    fc.assert(
      fc.property(
        fc.array(event(bucket.periodMs), { minLength: 50, maxLength: 300, size: 'max' }),
        offsets,
        (events, offs) => {
          const { redis, admitted, refunded } = run(bucket, reserve, events, offs);
          if (admitted.length === 0) return;
          const worst = worstOvershoot(bucket, redis.anchor, admitted, refunded);
          assert.ok(worst <= reserve, `overshoot ${worst} > reserve ${reserve}`);
        },
      ),
      { numRuns: 3000 },
    );
  });
}

test('token bucket: the records never hold more than the reserve together', () => {
  const bucket = new TokenBucket(100, 10, 100, 'stepped');
  const redis = new BucketLeaseModel(bucket, 6, HOLD_MS);
  // Three holders ask for big batches one after another: the first gets its request plus the reserve, the
  // others only their requests until it hands back or its record expires.
  assert.deepEqual(pick(redis.op(0, 'a', 0, { want: 50, need: 1 })), 7);
  assert.deepEqual(pick(redis.op(1, 'b', 0, { want: 50, need: 2 })), 2);
  redis.op(2, 'a', 4);
  assert.deepEqual(pick(redis.op(3, 'b', 0, { want: 50, need: 1 })), 5);
  // a's record (2 left) expires HOLD_MS after its take: b's next take may use the whole reserve.
  assert.deepEqual(pick(redis.op(HOLD_MS + 10, 'b', 0, { want: 50, need: 1 })), 7);
  // A void batch handed back late is forfeit: a has no live record, nothing is credited.
  const before = bucket.available(redis.s, 0);
  redis.op(HOLD_MS + 20, 'a', 6);
  assert.equal(bucket.available(redis.s, 0), before);
});

function pick(reply: TakeReply | undefined): number {
  assert.ok(reply?.granted);
  return reply.permits;
}
