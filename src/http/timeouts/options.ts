import { describe } from '../../duration.ts';
import { rejectUnknown } from '../../options/known.ts';
import { buildPolicy, type TimeoutPolicy, type TimeoutPolicySpec } from './policy.ts';

/** What {@link RequestTimeoutsOptions.onTimeout} receives when a deadline passes with the request unanswered. */
export interface TimeoutInfo {
  /** Name of the policy that applied: `'default'`, a name under `policies`, or `'route'`. */
  readonly policy: string;
  /** The route, as the framework names it (`/users/:id`), or the request path for node:http. */
  readonly route: string | undefined;
  readonly method: string | undefined;
  /**
   * `'answered'`: the policy's response was sent. `'cut'`: the response had started, so it was ended early.
   * `'handler'`: the handler answered after its signal aborted (in an 'abort' listener, or within the grace).
   */
  readonly result: 'answered' | 'cut' | 'handler';
  /** Whether the handler was still running at the deadline (then {@link RequestTimeoutsOptions.onOverrun} follows). */
  readonly overrun: boolean;
}

/** What {@link RequestTimeoutsOptions.onOverrun} receives when a handler that ran past its deadline finishes. */
export interface OverrunInfo {
  readonly policy: string;
  readonly route: string | undefined;
  readonly method: string | undefined;
  /** Milliseconds the handler ran past its deadline. */
  readonly overrunMs: number;
}

/** Options of `requestTimeouts()`, the same in every adapter. */
export interface RequestTimeoutsOptions {
  /**
   * The policy of every request that its route does not override. Without it, nothing times out unless its
   * route names a duration or a policy.
   */
  default?: TimeoutPolicySpec;
  /** Policies that routes can name. A name must not read as a duration (`'10s'` is a duration). */
  policies?: Record<string, TimeoutPolicySpec>;
  /** Called when a deadline passes and floodgate answers (or cuts) the response. Must not throw. */
  onTimeout?: (info: TimeoutInfo) => void;
  /** Called when a handler that was still running at its deadline finishes. Must not throw. */
  onOverrun?: (info: OverrunInfo) => void;
}

/** Options after validation. */
export interface ResolvedOptions {
  readonly defaultPolicy: TimeoutPolicy | undefined;
  readonly policies: ReadonlyMap<string, TimeoutPolicy>;
  readonly onTimeout: ((info: TimeoutInfo) => void) | undefined;
  readonly onOverrun: ((info: OverrunInfo) => void) | undefined;
}

/**
 * Every option name of {@link RequestTimeoutsOptions}: any other is refused, with the closest of these named.
 * Add a name here with its option.
 */
export const REQUEST_TIMEOUTS_OPTION_NAMES: readonly string[] = [
  'default',
  'policies',
  'onTimeout',
  'onOverrun',
];
const DURATION_LIKE = /^\s*\d+(?:\.\d+)?(?:ms|s|m|h)\s*$/;

/** Validates the options: `TypeError` / `RangeError` naming the option and the value. */
export function resolveOptions(options: unknown): ResolvedOptions {
  if (options === undefined) options = {};
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new TypeError(`requestTimeouts options must be an object; got ${describe(options)}`);
  }
  rejectUnknown('requestTimeouts', options, REQUEST_TIMEOUTS_OPTION_NAMES);
  const o = options as RequestTimeoutsOptions;
  const defaultPolicy =
    o.default === undefined ? undefined : buildPolicy('default', 'default', o.default, undefined);
  const policies = new Map<string, TimeoutPolicy>();
  if (o.policies !== undefined) {
    if (o.policies === null || typeof o.policies !== 'object' || Array.isArray(o.policies)) {
      throw new TypeError(
        `policies must be an object of policy names to policies; got ${describe(o.policies)}`,
      );
    }
    for (const [name, spec] of Object.entries(o.policies)) {
      checkPolicyName(name);
      policies.set(name, buildPolicy(`policies.${name}`, name, spec, defaultPolicy));
    }
  }
  return {
    defaultPolicy,
    policies,
    onTimeout: optionalFunction('onTimeout', o.onTimeout),
    onOverrun: optionalFunction('onOverrun', o.onOverrun),
  };
}

function checkPolicyName(name: string): void {
  // A route setting is a duration or a name; a name that reads as a duration could never be reached.
  if (name === '' || DURATION_LIKE.test(name)) {
    throw new RangeError(
      `policies: ${describe(name)} is not a usable policy name (it is empty or reads as a duration)`,
    );
  }
  // 'default' and 'route' are how metrics name the default policy and route-level settings.
  if (name === 'default' || name === 'route') {
    throw new RangeError(
      `policies: ${describe(name)} is reserved; use the 'default' option or a route setting`,
    );
  }
}

function optionalFunction<T>(name: string, value: T): T | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'function') throw new TypeError(`${name} must be a function; got ${describe(value)}`);
  return value;
}

/** True when `value` is a string that reads as a duration rather than a policy name. */
export function looksLikeDuration(value: string): boolean {
  return DURATION_LIKE.test(value);
}
