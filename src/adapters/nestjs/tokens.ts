import type { ExecutionContext } from '@nestjs/common';
import type { RateLimitingOptions } from '../../http/rate-limiting/options.ts';

/** The injection token of the module's options (what `forRoot` was given, or `forRootAsync`'s factory made). */
export const FLOODGATE_OPTIONS = Symbol.for('floodgate.nestjs.options');
/** The injection token of the module's rate-limiting engine. */
export const FLOODGATE_ENGINE = Symbol.for('floodgate.nestjs.engine');

/**
 * Options of `FloodgateModule`: those of every adapter's `rateLimiting()` (global limiter, named policies,
 * status, body, headers, dry run, skip, refunds, `onRejected`), every hook receiving Nest's `ExecutionContext`
 * (`context.switchToHttp().getRequest()` is the request, with `req.user` set by a Passport guard that ran
 * before).
 */
export type FloodgateModuleOptions = RateLimitingOptions<ExecutionContext, ExecutionContext>;

/** The injection token of `FloodgateTimeoutsModule`'s options. */
export const FLOODGATE_TIMEOUTS_OPTIONS = Symbol.for('floodgate.nestjs.timeoutsOptions');
/** The injection token of `FloodgateTimeoutsModule`'s timeouts engine. */
export const FLOODGATE_TIMEOUTS_ENGINE = Symbol.for('floodgate.nestjs.timeoutsEngine');
