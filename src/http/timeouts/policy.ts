import { STATUS_CODES } from 'node:http';
import { type Duration, describe, parseDuration } from '../../duration.ts';
import { rejectUnknown } from '../../options/known.ts';

/** What a timeout policy says: how long a request may run and what the client gets when it runs out. */
export interface TimeoutPolicyOptions {
  /** How long the request may run, counted from the moment the timeouts middleware saw it. */
  timeout: Duration;
  /** Status of the answer sent at the deadline. Default: the default policy's, else 504. */
  status?: number;
  /** Headers of that answer. Default: the default policy's, else none. */
  headers?: Record<string, string>;
  /** Body of that answer. Default: the default policy's, else empty. */
  body?: string | Uint8Array;
  /**
   * Milliseconds the handler may still answer after its signal aborted (it caught the cancellation and answers a
   * partial result, say). Its answer within the grace wins; else the policy answers at deadline + grace. A request
   * still waiting in a rate limiter's queue at the deadline is answered then, without the grace. Default: the
   * default policy's, else 0.
   */
  graceMs?: number;
}

/** A policy given as a bare duration, or in full. */
export type TimeoutPolicySpec = Duration | TimeoutPolicyOptions;

/** A validated policy, ready to answer with. */
export interface TimeoutPolicy {
  /** `'default'`, the name under `policies`, or `'route'` for a duration or policy given on the route. */
  readonly name: string;
  readonly ms: number;
  readonly status: number;
  readonly statusMessage: string;
  /** Lower-case names, in the order given. */
  readonly headers: ReadonlyArray<readonly [string, string]>;
  readonly body: Buffer;
  /** Milliseconds after the deadline during which the handler's own answer still wins. */
  readonly graceMs: number;
}

/**
 * Every option name of {@link TimeoutPolicyOptions}: any other is refused, with the closest of these named.
 * Add a name here with its option.
 */
export const TIMEOUT_POLICY_OPTION_NAMES: readonly string[] = [
  'timeout',
  'status',
  'headers',
  'body',
  'graceMs',
];

/** The answer of a policy that sets nothing: 504, no headers, empty body. */
const BUILT_IN = {
  status: 504,
  headers: [] as Array<readonly [string, string]>,
  body: Buffer.alloc(0),
  graceMs: 0,
};

/**
 * Validates `spec` (found at option path `path`) into a {@link TimeoutPolicy}. Response fields the spec leaves out are
 * taken one by one from `base` (the default policy), so `policies: { slow: '30s' }` answers like the default.
 */
export function buildPolicy(
  path: string,
  name: string,
  spec: unknown,
  base: TimeoutPolicy | undefined,
): TimeoutPolicy {
  const inherited = base ?? BUILT_IN;
  if (typeof spec === 'number' || typeof spec === 'string') {
    const ms = parseDuration(path, spec);
    return freeze(name, ms, inherited.status, inherited.headers, inherited.body, inherited.graceMs);
  }
  if (spec === null || typeof spec !== 'object' || Array.isArray(spec)) {
    throw new TypeError(
      `${path} must be a duration or an object { timeout, status?, headers?, body?, graceMs? }; got ${describe(spec)}`,
    );
  }
  rejectUnknown(`requestTimeouts: ${path}`, spec, TIMEOUT_POLICY_OPTION_NAMES);
  const options = spec as TimeoutPolicyOptions;
  const ms = parseDuration(`${path}.timeout`, options.timeout);
  const status =
    options.status === undefined ? inherited.status : parseStatus(`${path}.status`, options.status);
  let headers =
    options.headers === undefined ? inherited.headers : parseHeaders(`${path}.headers`, options.headers);
  let body = inherited.body;
  if (options.body !== undefined) {
    body = parseBody(`${path}.body`, options.body);
    // A text body without a declared type would otherwise get a different guess from each framework.
    if (typeof options.body === 'string' && body.length > 0 && !headers.some(([n]) => n === 'content-type')) {
      headers = [...headers, ['content-type', 'text/plain; charset=utf-8']];
    }
  }
  const graceMs =
    options.graceMs === undefined ? inherited.graceMs : parseGrace(`${path}.graceMs`, options.graceMs);
  return freeze(name, ms, status, headers, body, graceMs);
}

function freeze(
  name: string,
  ms: number,
  status: number,
  headers: ReadonlyArray<readonly [string, string]>,
  body: Buffer,
  graceMs: number,
): TimeoutPolicy {
  return Object.freeze({
    name,
    ms,
    status,
    statusMessage: STATUS_CODES[status] ?? '',
    headers,
    body,
    graceMs,
  });
}

function parseGrace(path: string, value: unknown): number {
  if (typeof value !== 'number')
    throw new TypeError(`${path} must be a number of milliseconds; got ${describe(value)}`);
  if (!Number.isFinite(value) || value < 0) {
    throw new RangeError(`${path} must be a finite number of milliseconds ≥ 0; got ${describe(value)}`);
  }
  return value;
}

function parseStatus(path: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isInteger(value)) {
    throw new TypeError(`${path} must be an integer HTTP status; got ${describe(value)}`);
  }
  // 1xx would not end the exchange and 2xx/3xx would tell the client the request succeeded or moved.
  if (value < 400 || value > 599) throw new RangeError(`${path} must be between 400 and 599; got ${value}`);
  return value;
}

// Headers the policy may not set: the answer's framing is computed from its own body.
const FRAMING = new Set(['content-length', 'transfer-encoding', 'connection', 'trailer']);
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

function parseHeaders(path: string, value: unknown): Array<readonly [string, string]> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new TypeError(`${path} must be an object of header names to string values; got ${describe(value)}`);
  }
  const headers: Array<readonly [string, string]> = [];
  for (const [name, v] of Object.entries(value)) {
    if (!TOKEN.test(name)) throw new TypeError(`${path}: ${describe(name)} is not a valid header name`);
    if (FRAMING.has(name.toLowerCase())) {
      throw new RangeError(
        `${path}: ${describe(name)} is set by floodgate from the body and cannot be configured`,
      );
    }
    if (typeof v !== 'string' || /[\r\n\0]/.test(v)) {
      throw new TypeError(`${path}.${name} must be a string without CR, LF or NUL; got ${describe(v)}`);
    }
    headers.push([name.toLowerCase(), v]);
  }
  return headers;
}

function parseBody(path: string, value: unknown): Buffer {
  if (typeof value === 'string') return Buffer.from(value);
  if (value instanceof Uint8Array) return Buffer.from(value);
  throw new TypeError(`${path} must be a string or a Uint8Array; got ${describe(value)}`);
}
