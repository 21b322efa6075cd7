import type { Clock } from '../limiters/core.ts';
import type { ProviderQuota } from './provider-headers.ts';

/**
 * What an LLM provider says is left, per partition and per unit, mirrored on the client so that calls leave no
 * faster than the provider refills: a call waits until every unit has room for its cost (1 request; its
 * estimate in every token unit). Both providers document their quotas as continuously refilled buckets, so each
 * unit is mirrored as one: the limit, the refill rate — a lower bound learned from the answers, `(limit −
 * remaining − 1) / (reset + the reset's precision)`, the largest seen — and what the last answer said was left.
 *
 * An answer's `remaining` counts the calls the provider had seen when it answered: those sent before it (calls
 * reach the provider in the order they leave), but perhaps not those sent after it nor those still on their
 * way. Those are subtracted (`uncounted`), and an answer overtaken by a later call's answer may only lower the
 * mirror, so it errs low: it may wait a little too long, not send what the provider would refuse, as long as
 * the estimates are at least what the provider charges when a call arrives.
 */

/** One unit of a provider's quota, as the client mirrors it. */
interface Mirror {
  limit: number;
  /** Refill per millisecond: a lower bound, 0 until an answer tells. */
  rate: number;
  /** What the last answer said was left, at `at` (the client's clock). */
  left: number;
  at: number;
  /** Costs of the calls sent that `left` may not count. */
  uncounted: number;
  /** The order in which the call whose answer said `left` was sent. */
  sentAt: number;
}

/** One call's place in line, then in flight: made by {@link ProviderBudgets.enter}. */
export class Ticket {
  /** Order of sending and answering among the partition's events; undefined until then. */
  sentAt: number | undefined;
  answeredAt: number | undefined;
  constructor(
    readonly key: string,
    /** Its cost in every token unit (its estimate; 1 without one). A call costs 1 in a requests unit. */
    readonly tokens: number,
  ) {}

  cost(unit: string): number {
    return unit.endsWith(':requests') ? 1 : this.tokens;
  }
}

interface Partition {
  mirrors: Map<string, Mirror>;
  /** Calls in line, first in first out. */
  waiting: Ticket[];
  /** Calls sent that a later answer may not count. */
  sent: Ticket[];
  events: number;
  wakers: Set<() => void>;
}

export interface ProviderBudgetsOptions {
  clock: Clock;
  /** The longest wait, in milliseconds. */
  maxMs: number;
  /** Partitions remembered at once. */
  maxEntries: number;
}

/** A rate unknown yet: a call that does not fit waits for an answer, checking this often. */
const RECHECK_MS = 1000;

export class ProviderBudgets {
  private readonly partitions = new Map<string, Partition>();

  constructor(private readonly options: ProviderBudgetsOptions) {}

  /** A call to `key` costing `tokens`, in line behind the calls already waiting. */
  enter(key: string, tokens: number): Ticket {
    const ticket = new Ticket(key, tokens);
    this.partition(key).waiting.push(ticket);
    return ticket;
  }

  /**
   * Milliseconds before `ticket` may leave: 0 when every unit has room for it and for the calls ahead of it;
   * `Infinity` until an answer to a call in flight tells the rate. Before the provider has said anything, 0.
   */
  waitMs(ticket: Ticket): number {
    const p = this.partitions.get(ticket.key);
    if (p === undefined || p.mirrors.size === 0) return 0;
    const index = p.waiting.indexOf(ticket);
    const now = this.options.clock.now();
    let wait = 0;
    for (const [unit, m] of p.mirrors) {
      let need = m.uncounted;
      for (let i = 0; i <= index; i++) need += p.waiting[i].cost(unit);
      // A call larger than what can ever be free goes when the unit is full (no deadlock; the provider decides).
      need = Math.min(need, m.limit);
      const level = m.left + m.rate * (now - m.at);
      if (level >= need) continue;
      if (m.rate > 0) wait = Math.max(wait, (need - level) / m.rate);
      else if (p.sent.some((t) => t.answeredAt === undefined))
        wait = Math.max(wait, Number.POSITIVE_INFINITY);
    }
    // Unknown (a rate not learned yet, calls in flight): until an answer says.
    return Number.isFinite(wait) ? Math.min(wait, this.options.maxMs) : wait;
  }

  /** Waits up to `ms` (abortable), or until an answer or a departure for the partition may change it. */
  hold(ticket: Ticket, ms: number, signal: AbortSignal | undefined): Promise<void> {
    const p = this.partition(ticket.key);
    return new Promise((resolve, reject) => {
      const finish = () => {
        clearTimeout(timer);
        p.wakers.delete(done);
        signal?.removeEventListener('abort', onAbort);
      };
      const done = () => {
        finish();
        resolve();
      };
      const onAbort = () => {
        finish();
        reject(signal?.reason);
      };
      const delay = Number.isFinite(ms) ? Math.max(1, Math.ceil(ms)) : RECHECK_MS;
      const timer = setTimeout(done, Math.min(delay, 2_147_483_647));
      p.wakers.add(done);
      if (signal?.aborted) onAbort();
      else signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** `ticket` leaves the line without being sent (its caller gave up). */
  leave(ticket: Ticket): void {
    const p = this.partitions.get(ticket.key);
    if (p === undefined) return;
    const index = p.waiting.indexOf(ticket);
    if (index >= 0) p.waiting.splice(index, 1);
    this.wake(p);
  }

  /** `ticket` is sent: from now on it counts against every unit until an answer counts it. */
  send(ticket: Ticket): void {
    const p = this.partition(ticket.key);
    const index = p.waiting.indexOf(ticket);
    if (index >= 0) p.waiting.splice(index, 1);
    ticket.sentAt = ++p.events;
    p.sent.push(ticket);
    for (const [unit, m] of p.mirrors) m.uncounted += ticket.cost(unit);
  }

  /**
   * The answer to `ticket` (sent) came, with the provider's quotas (none for a network error or an answer
   * without them): each unit it reports is mirrored afresh.
   */
  answer(ticket: Ticket, quotas: readonly ProviderQuota[]): void {
    const p = this.partitions.get(ticket.key);
    if (p === undefined || ticket.sentAt === undefined || ticket.answeredAt !== undefined) return;
    ticket.answeredAt = ++p.events;
    const now = this.options.clock.now();
    for (const q of quotas) {
      if (q.limit === undefined || q.remaining === undefined || q.limit <= 0) continue;
      const unit = `${q.provider}:${q.unit}`;
      let m = p.mirrors.get(unit);
      let fresh = true;
      if (m === undefined || m.limit !== q.limit) {
        m = { limit: q.limit, rate: 0, left: q.limit, at: now, uncounted: 0, sentAt: 0 };
        p.mirrors.set(unit, m);
      } else fresh = ticket.sentAt > m.sentAt;
      // A lower bound: `remaining` may be rounded down (one less than is left) and the reset rounded.
      if (q.resetMs !== undefined && q.resetMs > 0 && q.remaining < q.limit - 1) {
        m.rate = Math.max(m.rate, (q.limit - q.remaining - 1) / (q.resetMs + q.resetPrecisionMs));
      }
      // Not counted, perhaps: the calls sent after this one, and those sent before it still unanswered (calls
      // reach the provider in the order they leave, give or take those still on their way).
      let uncounted = 0;
      for (const t of p.sent) {
        if (t === ticket || (t.answeredAt !== undefined && (t.sentAt ?? 0) < ticket.sentAt)) continue;
        uncounted += t.cost(unit);
      }
      const left = Math.min(q.remaining, q.limit);
      if (fresh) {
        m.left = left;
        m.at = now;
        m.uncounted = uncounted;
        m.sentAt = ticket.sentAt;
      } else if (left - uncounted < m.left + m.rate * (now - m.at) - m.uncounted) {
        // An answer overtaken by a later call's: it may lower what is believed left, never raise it.
        m.left = left;
        m.at = now;
        m.uncounted = uncounted;
      }
    }
    // An answered call sent before every call still in flight is counted by every answer to come.
    let oldest = Number.POSITIVE_INFINITY;
    for (const t of p.sent) if (t.answeredAt === undefined) oldest = Math.min(oldest, t.sentAt ?? 0);
    p.sent = p.sent.filter((t) => t.answeredAt === undefined || (t.sentAt ?? 0) > oldest);
    this.wake(p);
  }

  private wake(p: Partition): void {
    for (const wake of [...p.wakers]) wake();
  }

  private partition(key: string): Partition {
    let p = this.partitions.get(key);
    if (p !== undefined) return p;
    if (this.partitions.size >= this.options.maxEntries) {
      // Forget a partition with nothing in line or in flight, else the oldest.
      let victim: string | undefined;
      for (const [k, q] of this.partitions) {
        victim ??= k;
        if (q.waiting.length === 0 && q.sent.length === 0) {
          victim = k;
          break;
        }
      }
      if (victim !== undefined) this.partitions.delete(victim);
    }
    p = { mirrors: new Map(), waiting: [], sent: [], events: 0, wakers: new Set() };
    this.partitions.set(key, p);
    return p;
  }
}
