/** The store did not answer a decision in time, or failed: the caller applies `onUnavailable`. */
export class StoreUnavailableError extends Error {
  /**
   * @internal False when the failure says nothing of the node's health (a Cluster call over several keys of a
   * slot being migrated, late because its client retries TRYAGAIN): decisions keep going to that node.
   */
  skip = true;

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StoreUnavailableError';
  }
}

/**
 * One request for the decision script, and where its answer goes. It writes its keys and arguments straight
 * into the call's (no arrays of its own: a decision allocates little, so the collector pauses it rarely).
 */
export interface Request {
  /** Its first key: the Cluster slot of all of them. */
  readonly key: string;
  /** Appends one key per member. */
  keysTo(out: string[]): void;
  /** Appends the request's encoded arguments (`encodeRequest`). */
  argsTo(out: string[]): void;
  /** The script's answer to this request: its fields separated by ','. Must not throw. */
  answer(reply: string): void;
  /** Redis failed or missed the deadline. Must not throw. */
  fail(error: StoreUnavailableError): void;
  /**
   * For a request that may hold something in Redis (a concurrency permit): its reply, come after it missed its
   * deadline, so that what it granted is given back. Must not throw.
   */
  readonly late?: ((reply: string) => void) | undefined;
}

/** KEYS, then ARGV: the number of requests and each request's arguments, built in one array. */
export function encode(requests: readonly Request[]): { numKeys: number; args: string[] } {
  const args: string[] = [];
  for (const r of requests) r.keysTo(args);
  const numKeys = args.length;
  args.push(String(requests.length));
  for (const r of requests) r.argsTo(args);
  return { numKeys, args };
}

export function unavailable(cause: unknown): StoreUnavailableError {
  return new StoreUnavailableError(`Redis failed: ${(cause as Error)?.message ?? cause}`, { cause });
}

/**
 * A Cluster's "TRYAGAIN" (a call over several keys of a slot being migrated, some moved and some not), as the
 * client passes it on: node-redis as is; ioredis once its own retries are spent ("Too many Cluster redirections.
 * Last error: …", TRYAGAIN or the MOVED its retry on a random node got back).
 */
export function isTryAgain(cause: unknown): boolean {
  const text = cause instanceof Error ? cause.message : '';
  return text.startsWith('TRYAGAIN') || text.startsWith('Too many Cluster redirections');
}
