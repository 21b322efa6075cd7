import { createHash } from 'node:crypto';
import { CONCURRENCY } from './lua/concurrency.ts';
import { DECIDE } from './lua/decide.ts';
import { FIXED_WINDOW } from './lua/fixed-window.ts';
import { PRELUDE } from './lua/prelude.ts';
import { SLIDING_WINDOW } from './lua/sliding-window.ts';
import { TOKEN_BUCKET } from './lua/token-bucket.ts';

/** A Lua script and its SHA1, as `EVALSHA` wants it. */
export interface Script {
  readonly source: string;
  readonly sha: string;
}

/**
 * The decision script: every algorithm plus the batch/chain driver, in one source. One script rather than one
 * per algorithm because a chain mixes algorithms in one call and a batch mixes limiters; it is loaded once per
 * node and each call runs only the functions its members name.
 */
export const DECIDE_SCRIPT: Script = script(
  [PRELUDE, FIXED_WINDOW, SLIDING_WINDOW, TOKEN_BUCKET, CONCURRENCY, DECIDE].join('\n'),
);

function script(source: string): Script {
  return { source, sha: createHash('sha1').update(source).digest('hex') };
}
