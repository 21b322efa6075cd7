import type { ScriptRunner } from './client.ts';
import { DECIDE_SCRIPT } from './script.ts';
import { keySlot } from './slot.ts';

/** The store did not answer a decision in time, or failed: the caller applies `onUnavailable`. */
export class StoreUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StoreUnavailableError';
  }
}

interface Pending {
  keys: readonly string[];
  args: readonly string[];
  resolve(reply: unknown[]): void;
  reject(error: unknown): void;
}

// A bigger batch holds Redis longer; past this the gain per request is small.
const MAX_BATCH = 128;

/**
 * Sends decisions to Redis with a deadline of its own per call (independent of the client's timeouts or its
 * offline queue) and, when `coalesce` is on, gathers the decisions issued in the same tick into one script call
 * per slot (per node without Cluster): one round trip for many decisions, in the order they were asked.
 */
export class Dispatcher {
  private readonly groups = new Map<number, Pending[]>();
  private scheduled = false;

  constructor(
    private readonly runner: ScriptRunner,
    private readonly timeoutMs: number,
    private readonly coalesce: boolean,
  ) {}

  /** Runs one request (its own `keys` and encoded `args`); resolves with its reply. */
  send(keys: readonly string[], args: readonly string[]): Promise<unknown[]> {
    return new Promise((resolve, reject) => {
      const pending: Pending = { keys, args, resolve, reject };
      if (!this.coalesce) {
        this.call([pending]);
        return;
      }
      const slot = this.runner.cluster ? keySlot(keys[0]) : 0;
      let group = this.groups.get(slot);
      if (!group) {
        group = [];
        this.groups.set(slot, group);
      }
      group.push(pending);
      if (group.length >= MAX_BATCH) {
        this.groups.delete(slot);
        this.call(group);
      } else if (!this.scheduled) {
        this.scheduled = true;
        // After the promise reactions of this tick: decisions issued by them join the batch too.
        process.nextTick(() => this.flush());
      }
    });
  }

  private flush(): void {
    this.scheduled = false;
    const groups = [...this.groups.values()];
    this.groups.clear();
    for (const group of groups) this.call(group);
  }

  private call(group: Pending[]): void {
    const keys: string[] = [];
    const args: string[] = [String(group.length)];
    for (const p of group) {
      for (const k of p.keys) keys.push(k);
      for (const a of p.args) args.push(a);
    }
    let settled = false;
    const timer = setTimeout(() => {
      settled = true;
      const error = new StoreUnavailableError(`Redis did not answer within ${this.timeoutMs} ms`);
      for (const p of group) p.reject(error);
    }, this.timeoutMs);
    let call: Promise<unknown>;
    try {
      call = this.runner.run(DECIDE_SCRIPT, keys, args);
    } catch (error) {
      call = Promise.reject(error);
    }
    call.then(
      (reply) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        if (!Array.isArray(reply) || reply.length !== group.length) {
          const error = new StoreUnavailableError(
            'Redis answered the decision script with an unexpected reply',
          );
          for (const p of group) p.reject(error);
          return;
        }
        for (let i = 0; i < group.length; i++) group[i].resolve(reply[i] as unknown[]);
      },
      (cause) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        const error = new StoreUnavailableError(`Redis failed: ${(cause as Error)?.message ?? cause}`, {
          cause,
        });
        for (const p of group) p.reject(error);
      },
    );
  }
}
