import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { ProviderBudgets, type Ticket } from '../../src/fetch/provider-budget.ts';
import { providerQuotas } from '../../src/fetch/provider-headers.ts';
import { goDuration } from './llm-provider.ts';

/**
 * A client pacing to a provider in virtual time: the provider's buckets (requests and tokens, refilled
 * continuously, starting empty), its charge on arrival (input + max_tokens) and its refund of unused output when
 * the answer ends; the fields of one vendor on every answer, written as that vendor writes them (OpenAI's
 * durations to the millisecond; Anthropic's RFC 3339 resets in whole seconds beside a `Date` in whole seconds);
 * network latency each way. The client offers `load` times the provider's token rate and paces each call
 * through {@link ProviderBudgets}, estimating exactly what the provider charges on arrival.
 */
interface Scenario {
  dialect: 'openai' | 'anthropic';
  tokensPerWindow: number;
  windowMs: number;
  /**
   * Each way, plus up to `jitter × latencyMs` at random: calls and answers overtake one another, though not by
   * more than half the latency (beyond, the mirror can be off by the calls overtaken: see the docs).
   */
  latencyMs: number;
  jitter: number;
  /** From arrival to the answer's end (the refund). */
  generationMs: number;
  /** Mean cost of a call as a share of the window's tokens. */
  costShare: number;
  load: number;
  windows: number;
  seed: number;
}

interface Outcome {
  /** Calls refused that were sent after the client's first answer. */
  refusedAfterFirstAnswer: number;
  refused: number;
  admitted: number;
  /** Real tokens admitted ÷ (the token rate × the run). */
  throughput: number;
}

function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function simulate(s: Scenario): Outcome {
  const random = mulberry32(s.seed);
  const EPOCH = Date.UTC(2026, 11, 6, 4, 0, 0) + Math.floor(random() * 1000);
  let now = 0;
  // Events in time order (a binary heap; ties in the order scheduled).
  type Event = { at: number; seq: number; run: () => void };
  const events: Event[] = [];
  let seq = 0;
  const before = (a: Event, b: Event) => a.at < b.at || (a.at === b.at && a.seq < b.seq);
  const at = (time: number, run: () => void) => {
    events.push({ at: time, seq: seq++, run });
    for (let i = events.length - 1; i > 0; ) {
      const parent = (i - 1) >> 1;
      if (!before(events[i], events[parent])) break;
      [events[i], events[parent]] = [events[parent], events[i]];
      i = parent;
    }
  };
  const next = (): Event => {
    const top = events[0];
    const last = events.pop()!;
    if (events.length > 0) {
      events[0] = last;
      for (let i = 0; ; ) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < events.length && before(events[l], events[m])) m = l;
        if (r < events.length && before(events[r], events[m])) m = r;
        if (m === i) break;
        [events[i], events[m]] = [events[m], events[i]];
        i = m;
      }
    }
    return top;
  };
  // The provider.
  const rate = s.tokensPerWindow / s.windowMs;
  const requestsPerWindow = Math.ceil((10 * s.load) / s.costShare);
  const bucket = (size: number) => ({ size, level: 0, at: 0 });
  const buckets = { tokens: bucket(s.tokensPerWindow), requests: bucket(requestsPerWindow) };
  const refill = (b: ReturnType<typeof bucket>) => {
    b.level = Math.min(b.size, b.level + ((now - b.at) * b.size) / s.windowMs);
    b.at = now;
    return b.level;
  };
  const fields = (): Record<string, string> => {
    const h: Record<string, string> = { date: new Date(EPOCH + now).toUTCString() };
    for (const unit of ['requests', 'tokens'] as const) {
      const b = buckets[unit];
      const untilFull = ((b.size - refill(b)) * s.windowMs) / b.size;
      const remaining = String(Math.floor(b.level));
      if (s.dialect === 'openai') {
        h[`x-ratelimit-limit-${unit}`] = String(b.size);
        h[`x-ratelimit-remaining-${unit}`] = remaining;
        h[`x-ratelimit-reset-${unit}`] = goDuration(untilFull);
      } else {
        const full = new Date(Math.ceil((EPOCH + now + untilFull) / 1000) * 1000).toISOString();
        h[`anthropic-ratelimit-${unit}-limit`] = String(b.size);
        h[`anthropic-ratelimit-${unit}-remaining`] = remaining;
        h[`anthropic-ratelimit-${unit}-reset`] = full.replace('.000Z', 'Z');
      }
    }
    return h;
  };
  // The client.
  const book = new ProviderBudgets({ clock: { now: () => now }, maxMs: 300_000, maxEntries: 10 });
  const line: { ticket: Ticket; input: number; max: number; output: number }[] = [];
  let firstAnswer = Number.POSITIVE_INFINITY;
  let recheck = Number.POSITIVE_INFINITY;
  const outcome = { refusedAfterFirstAnswer: 0, refused: 0, admitted: 0, tokens: 0 };
  const pump = () => {
    while (line.length > 0) {
      const wait = book.waitMs(line[0].ticket);
      if (wait > 0) {
        // As the client does: a timer of whole milliseconds, at least one.
        const when = now + Math.max(1, Math.ceil(wait));
        if (Number.isFinite(wait) && when < recheck) {
          recheck = when;
          at(when, () => {
            if (recheck !== when) return; // superseded by an earlier one
            recheck = Number.POSITIVE_INFINITY;
            pump();
          });
        }
        return;
      }
      const call = line.shift()!;
      book.send(call.ticket);
      const sentAt = now;
      at(now + s.latencyMs * (1 + s.jitter * random()), () => {
        // Arrival: charged input + max_tokens, or refused.
        const charge = call.input + call.max;
        const fits = refill(buckets.tokens) >= charge && refill(buckets.requests) >= 1;
        if (fits) {
          buckets.tokens.level -= charge;
          buckets.requests.level -= 1;
          outcome.admitted++;
          outcome.tokens += call.input + call.output;
          at(now + s.generationMs, () => {
            refill(buckets.tokens);
            buckets.tokens.level = Math.min(
              buckets.tokens.size,
              buckets.tokens.level + call.max - call.output,
            );
          });
        } else {
          outcome.refused++;
          if (sentAt > firstAnswer) outcome.refusedAfterFirstAnswer++;
        }
        const h = fields();
        at(now + s.latencyMs * (1 + s.jitter * random()), () => {
          firstAnswer = Math.min(firstAnswer, now);
          const header = (name: string) => h[name];
          book.answer(call.ticket, providerQuotas(header, EPOCH + now, Date.parse(h.date)));
          pump();
        });
      });
    }
  };
  // Calls offered at `load` times the token rate, in real tokens.
  const mean = s.costShare * s.tokensPerWindow;
  const end = s.windows * s.windowMs;
  const arrive = () => {
    const max = Math.max(1, Math.round(mean * (0.3 + 0.6 * random())));
    const input = Math.max(1, Math.round(mean * (0.2 + 0.4 * random())));
    const output = Math.round(max * (0.5 + 0.5 * random()));
    line.push({ ticket: book.enter('p', input + max), input, max, output });
    pump();
    at(now + (input + output) / (s.load * rate), arrive);
  };
  at(0, arrive);
  while (events.length > 0 && events[0].at <= end) {
    const e = next();
    now = e.at;
    e.run();
  }
  return { ...outcome, throughput: outcome.tokens / (rate * end) };
}

const scenario = fc.record({
  dialect: fc.constantFrom('openai' as const, 'anthropic' as const),
  tokensPerWindow: fc.integer({ min: 10_000, max: 2_000_000 }),
  windowMs: fc.constantFrom(60_000),
  latencyMs: fc.integer({ min: 1, max: 300 }),
  jitter: fc.double({ min: 0, max: 0.5, noNaN: true }),
  generationMs: fc.integer({ min: 0, max: 5_000 }),
  costShare: fc.double({ min: 0.002, max: 0.02, noNaN: true }),
  load: fc.double({ min: 1.5, max: 4, noNaN: true }),
  windows: fc.constant(3),
  seed: fc.integer(),
});

test('paced to the provider fields at 1.5–4× its token rate: no refusal after the first answer, ≥ 95 % of the rate (property, virtual time)', () => {
  fc.assert(
    fc.property(scenario, (s) => {
      const o = simulate(s);
      assert.equal(o.refusedAfterFirstAnswer, 0, `refused after the first answer: ${JSON.stringify(o)}`);
      assert.ok(
        o.throughput >= 0.95,
        `throughput ${o.throughput.toFixed(3)} of the limit: ${JSON.stringify(o)}`,
      );
    }),
    { numRuns: 25 },
  );
});

test('without pacing (the same calls, sent as they come) the provider refuses most of them: the property can fail', () => {
  // The client's budgets never hear from the provider: every call leaves at once.
  const s = {
    dialect: 'openai' as const,
    tokensPerWindow: 100_000,
    windowMs: 60_000,
    latencyMs: 20,
    jitter: 0.25,
    generationMs: 500,
    costShare: 0.005,
    load: 3,
    windows: 4,
    seed: 7,
  };
  const paced = simulate(s);
  assert.equal(paced.refusedAfterFirstAnswer, 0);
  const original = ProviderBudgets.prototype.answer;
  ProviderBudgets.prototype.answer = function (ticket) {
    original.call(this, ticket, []);
  };
  try {
    const blind = simulate(s);
    assert.ok(blind.refusedAfterFirstAnswer > blind.admitted, JSON.stringify(blind));
  } finally {
    ProviderBudgets.prototype.answer = original;
  }
});

test('a call waits behind the calls ahead of it (first in, first out), and a big one is not overtaken', () => {
  let now = 0;
  const book = new ProviderBudgets({ clock: { now: () => now }, maxMs: 300_000, maxEntries: 10 });
  const header = (fields: Record<string, string>) => (name: string) => fields[name];
  // Learn: 1000 tokens a minute, 0 left, a minute until full.
  const first = book.enter('p', 1);
  book.send(first);
  book.answer(
    first,
    providerQuotas(
      header({
        'x-ratelimit-limit-tokens': '1000',
        'x-ratelimit-remaining-tokens': '0',
        'x-ratelimit-reset-tokens': '1m0s',
      }),
      0,
    ),
  );
  const big = book.enter('p', 600);
  const small = book.enter('p', 10);
  // 999 tokens per 61 s (the reset and its precision, one token of rounding): a lower bound of the rate.
  const perMs = 999 / 61_000;
  assert.ok(Math.abs(book.waitMs(big) - 600 / perMs) < 1);
  assert.ok(Math.abs(book.waitMs(small) - 610 / perMs) < 1, 'the small call waits behind the big one');
  now = 600 / perMs;
  assert.equal(book.waitMs(big), 0);
  book.send(big);
  assert.ok(book.waitMs(small) > 0, 'the big call counts until an answer counts it');
  book.leave(small);
  // A call larger than the whole limit goes when the unit is full, rather than never.
  const huge = book.enter('p', 5_000);
  now += 10 * 61_000;
  assert.equal(book.waitMs(huge), 0);
});

test('an answer from a call that left before others were answered does not forget them', () => {
  let now = 0;
  const book = new ProviderBudgets({ clock: { now: () => now }, maxMs: 300_000, maxEntries: 10 });
  const left = (remaining: number) => (name: string) =>
    ({
      'x-ratelimit-limit-tokens': '1000',
      'x-ratelimit-remaining-tokens': String(remaining),
      'x-ratelimit-reset-tokens': `${(1000 - remaining) * 60}ms`,
    })[name];
  const a = book.enter('p', 100);
  book.send(a);
  const b = book.enter('p', 100);
  book.send(b);
  // b is answered first (the provider counted a and b); a's answer comes late, from before b arrived.
  book.answer(b, providerQuotas(left(800), 0));
  book.answer(a, providerQuotas(left(900), 0));
  const c = book.enter('p', 850);
  // a's answer says 900, but b (in flight when a left) may not be in it: 900 − 100 = 800 < 850.
  assert.ok(book.waitMs(c) > 0, 'b is still counted');
  now = 1;
  assert.ok(book.waitMs(c) > 0);
});
