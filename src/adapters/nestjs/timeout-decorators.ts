import {
  type CustomDecorator,
  createParamDecorator,
  type ExecutionContext,
  SetMetadata,
} from '@nestjs/common';
import { requestTimeoutOf } from '../../http/timeouts/registry.ts';
import type { RouteTimeout } from '../../http/timeouts/route.ts';

/** The metadata key under which `@Timeout()` and `@NoTimeout()` store a handler's or controller's setting. */
export const TIMEOUT_METADATA = 'floodgate:timeout';

/**
 * The request timeout of a handler (or every handler of a controller): a duration (`'5s'`), a policy name of
 * `FloodgateTimeoutsModule` (checked when the application starts), or a policy object. A handler's setting wins
 * over its controller's; without one, the module's `default` applies.
 */
export function Timeout(setting: Exclude<RouteTimeout, false>): CustomDecorator<string> {
  return SetMetadata(TIMEOUT_METADATA, setting);
}

/** No request timeout on this handler (or controller), not even the module's default. */
export function NoTimeout(): CustomDecorator<string> {
  return SetMetadata(TIMEOUT_METADATA, false);
}

/**
 * A handler parameter: the request's `AbortSignal`, which aborts at the deadline and when the client goes away
 * (`undefined` when no timeout applies). `handler(@TimeoutSignal() signal: AbortSignal)`.
 */
export const TimeoutSignal = createParamDecorator((_data: unknown, context: ExecutionContext) => {
  const request = context.switchToHttp().getRequest<{ raw?: object }>();
  const timeout = requestTimeoutOf(request.raw ?? request) as
    | { running?: boolean; signal: AbortSignal }
    | undefined;
  return timeout?.signal;
});
