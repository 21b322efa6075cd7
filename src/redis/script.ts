import { createHash } from 'node:crypto';
import { ADMIN } from './lua/admin.ts';
import { BUCKET_LEASE } from './lua/bucket-lease.ts';
import { CONCURRENCY } from './lua/concurrency.ts';
import { DECIDE } from './lua/decide.ts';
import { FIXED_WINDOW } from './lua/fixed-window.ts';
import { GENERAL } from './lua/general.ts';
import { LOCKOUT } from './lua/lockout.ts';
import { PAIR_CHAIN } from './lua/pair-chain.ts';
import { PERMIT_LEASE } from './lua/permit-lease.ts';
import { PRELUDE } from './lua/prelude.ts';
import { SLIDING_WINDOW } from './lua/sliding-window.ts';
import { TOKEN_BUCKET } from './lua/token-bucket.ts';

/**
 * The decision code in the two forms Redis runs: a Redis Function (Redis >= 7: `FUNCTION LOAD` once per node,
 * then `FCALL`) and a script (Redis 6: `EVALSHA`). The same Lua body defines every algorithm and the batch
 * driver `decideBatch`; only the last line differs.
 */
export interface Script {
  /** The script for `EVAL`: the body, then a call of `decideBatch(KEYS, ARGV)`. */
  readonly source: string;
  /** Its SHA1, for `EVALSHA`. */
  readonly sha: string;
  /** The library for `FUNCTION LOAD REPLACE`: the body, then `register_function`. */
  readonly library: string;
  /** The function `FCALL` calls (named after the code, so two versions of floodgate never replace each other's). */
  readonly fn: string;
}

/**
 * The decision code: every algorithm plus the batch/chain driver, in one source. One rather than one per
 * algorithm because a chain mixes algorithms in one call and a batch mixes limiters; each call runs only the
 * functions its members name. As a Function, the tables, closures and parsed specs are built once per load
 * instead of once per call — most of the server time a decision took as a script.
 */
export const DECIDE_SCRIPT: Script = script(
  [
    PRELUDE,
    FIXED_WINDOW,
    SLIDING_WINDOW,
    TOKEN_BUCKET,
    CONCURRENCY,
    LOCKOUT,
    GENERAL,
    BUCKET_LEASE,
    PERMIT_LEASE,
    PAIR_CHAIN,
    ADMIN,
    DECIDE,
  ].join('\n'),
);

function script(body: string): Script {
  // Known states (see lua/prelude.ts) only as a Function: a script's body runs anew on every call, and Redis 6.0
  // has no `SET … GET`.
  const source = `local SPECULATE = false\n${body}\nreturn decideBatch(KEYS, ARGV)\n`;
  const fn = `floodgate_${createHash('sha1').update(body).digest('hex').slice(0, 16)}`;
  const library = `#!lua name=${fn}\nlocal SPECULATE = true\n${body}\nredis.register_function('${fn}', decideBatch)\n`;
  return { source, sha: createHash('sha1').update(source).digest('hex'), library, fn };
}
