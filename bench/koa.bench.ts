/**
 * Overhead of rate limiting on Koa: bare Koa vs Koa + floodgate vs Koa + koa-ratelimit (memory driver).
 *
 *   INPROC=1 npm run bench:koa                  # CPU per request in process (no sockets): the figure in docs/koa.md
 *   HOT=1 INPROC=1 npm run bench:koa            # one hot key: nearly every request is rejected (429)
 *   npm run bench:koa                           # over loopback with wrk (else autocannon), 5 rounds of 5 s
 *
 * The no-op contender shows what any Koa middleware costs before it does anything; 'two fields, no limiter'
 * sets the two draft-10 header fields floodgate sends, as constants, with no limiting. Both limiters key by
 * client address (`ctx.ip`) with a fixed window of one minute; the limit is 10^9 (nothing is rejected) or, with
 * HOT=1, 100. koa-ratelimit sends its three X-RateLimit-* fields. How servers are run and compared:
 * bench/http-runner.ts (shared with bench:http).
 */

import { runHttpBench } from './http-runner.ts';
import { koaVariants } from './koa-apps.ts';

process.env.FRAMEWORKS ??= 'koa';
const HOT = process.env.HOT === '1';
const LIMIT = HOT ? 100 : 1_000_000_000;

await runHttpBench({
  file: import.meta.url,
  variants: () => koaVariants(LIMIT),
  title: `Koa, ${HOT ? 'HOT KEY (limit 100/min, nearly all rejected)' : 'nothing rejected (limit 10^9/min)'}`,
  expectRejections: HOT,
});
