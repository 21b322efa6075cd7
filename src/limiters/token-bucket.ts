import { type Replenishment, TokenBucket } from '../algorithms/token-bucket.ts';
import type { Duration } from '../duration.ts';
import { describe } from '../duration.ts';
import { rejectUnknown } from '../options/known.ts';
import {
  duration,
  integer,
  object,
  oneOf,
  queueAndClock,
  TIME_OPTION_NAMES,
  type TimeOptions,
} from './options.ts';
import { RateLimiter } from './rate-limiter.ts';

/** Options of {@link tokenBucket}. */
export interface TokenBucketOptions extends TimeOptions {
  /** Tokens the bucket holds; it starts full. */
  tokenLimit: number;
  /** Tokens added each period. */
  tokensPerPeriod: number;
  /** The replenishment period. */
  period: Duration;
  /** `'stepped'` (default): whole periods at exact boundaries. `'continuous'`: in proportion to elapsed time. */
  replenishment?: Replenishment;
}

/** Every option name of {@link TokenBucketOptions}: any other is refused. */
export const TOKEN_BUCKET_OPTION_NAMES = [
  ...TIME_OPTION_NAMES,
  'tokenLimit',
  'tokensPerPeriod',
  'period',
  'replenishment',
] as const satisfies readonly (keyof TokenBucketOptions)[];

/** A bucket of `tokenLimit` tokens, refilled by `tokensPerPeriod` each `period`, never above the limit. */
export class TokenBucketLimiter extends RateLimiter {
  declare readonly algorithm: TokenBucket;

  constructor(options: TokenBucketOptions) {
    object('tokenBucket options', options);
    rejectUnknown('tokenBucket', options, TOKEN_BUCKET_OPTION_NAMES);
    const tokenLimit = integer('tokenBucket: tokenLimit', options.tokenLimit, 1);
    const tokensPerPeriod = integer('tokenBucket: tokensPerPeriod', options.tokensPerPeriod, 1);
    const period = duration('tokenBucket: period', options.period);
    const replenishment = oneOf(
      'tokenBucket: replenishment',
      options.replenishment,
      ['stepped', 'continuous'],
      'stepped',
    );
    if (tokensPerPeriod > tokenLimit) {
      throw new RangeError(
        `tokenBucket: tokensPerPeriod (${describe(tokensPerPeriod)}) must not exceed tokenLimit (${tokenLimit})`,
      );
    }
    super(
      new TokenBucket(tokenLimit, tokensPerPeriod, period, replenishment),
      queueAndClock('tokenBucket', options),
    );
  }

  /**
   * Changes `tokenLimit` (the bucket's size, Go's `SetBurst`) and, when given, `tokensPerPeriod` (its rate, Go's
   * `SetLimit`) from now on, here and in every partition built from this limiter. The bucket is first refilled
   * to now at the old rate (Go's `SetLimitAt`); lowered, tokens above the new size are gone; raised, no token is
   * added (they come with time). A waiter asking for more than the new size is rejected (`'limit'`).
   * `tokensPerPeriod` may not exceed `tokenLimit`, as at construction.
   */
  setLimit(tokenLimit: number, tokensPerPeriod?: number): void {
    const a = this.algorithm;
    const limit = integer('tokenBucket.setLimit: tokenLimit', tokenLimit, 1);
    const rate =
      tokensPerPeriod === undefined
        ? a.tokensPerPeriod
        : integer('tokenBucket.setLimit: tokensPerPeriod', tokensPerPeriod, 1);
    if (rate > limit) {
      throw new RangeError(
        `tokenBucket.setLimit: tokensPerPeriod (${rate}) must not exceed tokenLimit (${limit})`,
      );
    }
    this.retune('tokenBucket.setLimit', new TokenBucket(limit, rate, a.periodMs, a.replenishment));
  }
}

/** A token-bucket limiter. See {@link TokenBucketLimiter}. */
export function tokenBucket(options: TokenBucketOptions): TokenBucketLimiter {
  return new TokenBucketLimiter(options);
}
