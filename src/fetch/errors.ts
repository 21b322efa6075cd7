/** Why an outgoing call was refused locally. */
export type LimitedReason =
  | 'limit'
  | 'queue-full'
  | 'evicted'
  | 'overflow'
  | 'paused'
  | 'throttled'
  | (string & {});

/**
 * Thrown (with `onLimited: 'throw'`) or described (with `'respond'`) when a call is refused before it reaches
 * the network: the local limiter had no permit (`reason` is the lease's reason), or the server asked this
 * partition to pause (`'paused'`).
 */
export class RateLimitedError extends Error {
  override readonly name: string = 'RateLimitedError';
  /** A stable code for `catch` blocks that cannot use `instanceof` (several copies of floodgate). */
  readonly code = 'ERR_FLOODGATE_RATE_LIMITED';

  /**
   * @param reason Why the call was refused.
   * @param retryAfterMs When a call could succeed, if known.
   * @param key The partition key (by default the origin).
   */
  constructor(
    readonly reason: LimitedReason,
    readonly retryAfterMs: number | undefined,
    readonly key: string,
  ) {
    super(
      reason === 'paused'
        ? `Calls to ${key} are paused by the server for ${Math.ceil((retryAfterMs ?? 0) / 1000)} s`
        : `Rate limited locally (${reason}) for ${key}${retryAfterMs === undefined ? '' : `; retry in ${Math.ceil(retryAfterMs)} ms`}`,
    );
  }
}

/**
 * A call rejected locally by adaptive throttling (`adaptive`): too many recent calls to its partition failed,
 * and this one drew the short straw. Nothing was sent. A {@link RateLimitedError} with `reason: 'throttled'`,
 * so one `catch` handles every local refusal.
 */
export class ThrottledError extends RateLimitedError {
  override readonly name: string = 'ThrottledError';

  /**
   * @param probability The probability of rejection when this call was drawn.
   * @param key The partition key (by default the origin).
   */
  constructor(
    readonly probability: number,
    key: string,
  ) {
    super('throttled', undefined, key);
    this.message = `Throttled locally for ${key}: recent calls mostly failed (rejecting ${Math.round(probability * 100)} % of calls)`;
  }
}
