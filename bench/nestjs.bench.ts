/**
 * Overhead of rate limiting on NestJS 11 (Express platform): bare Nest vs Nest + floodgate's guard vs Nest +
 * @nestjs/throttler's guard, both as APP_GUARD.
 *
 *   INPROC=1 npm run bench:nestjs               # CPU per request in process (no sockets): the figure in docs/nestjs.md
 *   HOT=1 INPROC=1 npm run bench:nestjs         # one hot key: nearly every request is rejected (429)
 *   INSTRUCTIONS=1 HOT=1 npm run bench:nestjs   # instructions per request under callgrind (noise-free)
 *
 * The no-op contender is a guard that returns true: what any guard costs in Nest; 'two fields, no limiter' is a
 * guard that sets the two draft-10 fields floodgate sends, as constants. Both limiters key by client address
 * with a fixed window of one minute; the limit is 10^9 (nothing is rejected) or, with HOT=1, 100.
 * @nestjs/throttler runs with its default in-memory storage, and with floodgate's drop-in
 * FloodgateThrottlerStorage. The contenders: bench/nestjs-apps.ts (shared with bench:http). How servers are run and
 * compared: bench/http-runner.ts.
 */
import { runHttpBench } from './http-runner.ts';
import { nestVariants } from './nestjs-apps.ts';

process.env.FRAMEWORKS ??= 'nestjs';
const HOT = process.env.HOT === '1';
const LIMIT = HOT ? 100 : 1_000_000_000;

await runHttpBench({
  file: import.meta.url,
  variants: () => nestVariants(LIMIT, { storage: true }),
  title: `NestJS (Express), ${HOT ? 'HOT KEY (limit 100/min, nearly all rejected)' : 'nothing rejected (limit 10^9/min)'}`,
  expectRejections: HOT,
});
