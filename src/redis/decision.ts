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

/** One decision in flight: its request for the dispatcher, and its promise's settlement. */
export class Decision implements Request {
  constructor(
    private readonly engine: DecisionHost,
    readonly binding: Binding,
    readonly op: 't' | 'w',
    readonly permits: number,
    readonly reason: string,
    readonly leaseId: string,
    private readonly blockedFirst: boolean,
    /** The clock as the script should read it, taken when the decision was asked. */
    private readonly now: string,
    readonly cacheKey: string,
    private readonly asLease: boolean,
    private readonly resolve: (value: Decided | Lease) => void,
    private readonly reject: (error: unknown) => void,
  ) {}

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
