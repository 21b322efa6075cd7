import type { Lease } from '../limiters/lease.ts';
import type { Binding, Decided } from './binding.ts';
import type { Request, StoreUnavailableError } from './request.ts';

/** What a decision needs of the engine that made it (the engine, without importing it). */
export interface DecisionHost {
  encodeArgs(
    out: string[],
    binding: Binding,
    op: 't' | 'w',
    permits: number,
    leaseId: string,
    blockedFirst: boolean,
    now: string,
  ): void;
  answered(d: Decision, reply: string): Decided;
  unanswered(d: Decision, error: StoreUnavailableError): Decided;
  answeredLate(d: Decision, reply: string): void;
}

/** What one decision asks and how its promise settles, by name: the fields of a {@link Decision}. */
export interface DecisionFields {
  /** The engine that asked it, which encodes its arguments and reads the reply. */
  readonly host: DecisionHost;
  readonly binding: Binding;
  /** `'t'` a try (charges a rejection when `countRejected`), `'w'` a queued attempt (never does). */
  readonly op: 't' | 'w';
  readonly permits: number;
  /** The rejection reason its lease carries when refused. */
  readonly reason: string;
  /** `"<permits>:<id>"` when a member holds concurrency permits, else ''. */
  readonly leaseId: string;
  /** Local waiters are ahead of it (oldest-first): it may not overtake them. */
  readonly blockedFirst: boolean;
  /** The clock as the script should read it, taken when the decision was asked ('' is Redis's own). */
  readonly now: string;
  /** Its members' key in the blocked cache, or '' when the cache is off. */
  readonly cacheKey: string;
  /** Settle with the lease alone (`tryAcquire`) instead of the whole {@link Decided}. */
  readonly asLease: boolean;
  readonly resolve: (value: Decided | Lease) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * One decision in flight: its request for the dispatcher, and its promise's settlement. Made by
 * {@link Decision.of} from named fields; the constructor is private.
 */
export class Decision implements Request {
  private constructor(
    private readonly engine: DecisionHost,
    readonly binding: Binding,
    readonly op: 't' | 'w',
    readonly permits: number,
    readonly reason: string,
    readonly leaseId: string,
    private readonly blockedFirst: boolean,
    private readonly now: string,
    readonly cacheKey: string,
    private readonly asLease: boolean,
    private readonly resolve: (value: Decided | Lease) => void,
    private readonly reject: (error: unknown) => void,
  ) {}

  /** The decision `f` describes (a named factory, as the leases have). */
  static of(f: DecisionFields): Decision {
    return new Decision(
      f.host,
      f.binding,
      f.op,
      f.permits,
      f.reason,
      f.leaseId,
      f.blockedFirst,
      f.now,
      f.cacheKey,
      f.asLease,
      f.resolve,
      f.reject,
    );
  }

  /** A decision that may be granted a concurrency permit: a reply after its deadline releases what it granted. */
  get late(): ((reply: string) => void) | undefined {
    if (this.leaseId === '') return undefined;
    return (reply) => {
      try {
        this.engine.answeredLate(this, reply);
      } catch {
        // Left to the lease's TTL.
      }
    };
  }

  get key(): string {
    return this.binding.members[0].key;
  }

  keysTo(out: string[]): void {
    for (const m of this.binding.members) out.push(m.key);
  }

  argsTo(out: string[]): void {
    this.engine.encodeArgs(
      out,
      this.binding,
      this.op,
      this.permits,
      this.leaseId,
      this.blockedFirst,
      this.now,
    );
  }

  answer(reply: string): void {
    try {
      this.settle(this.engine.answered(this, reply));
    } catch (error) {
      this.reject(error);
    }
  }

  fail(error: StoreUnavailableError): void {
    try {
      this.settle(this.engine.unanswered(this, error));
    } catch (caught) {
      this.reject(caught);
    }
  }

  private settle(decided: Decided): void {
    this.resolve(this.asLease ? decided.lease : decided);
  }
}
