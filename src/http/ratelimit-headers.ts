import * as crypto from 'node:crypto';
import { describe } from '../duration.ts';
import { ownText } from '../limiters/partitioned.ts';
import { rejectUnknown } from '../options/known.ts';

/** A quota unit of draft-ietf-httpapi-ratelimit-headers-10 (§3.1.2). */
export type QuotaUnit = 'requests' | 'content-bytes' | 'concurrent-requests';

/** One policy's state after a decision, as the response headers report it. */
export interface PolicyState {
  /** The policy's name (`'global'`, `'api'`). Characters a Structured Field string cannot hold are dropped. */
  name: string;
  /** The quota: permits per window, or concurrent permits. */
  limit: number;
  /** Permits left. */
  remaining: number;
  /** The window, when the policy has one (a concurrency limit has none). */
  windowMs?: number;
  /** Time until more quota is available, when known. */
  resetAfterMs?: number;
  /** The partition's key (a client address, an API key). Only a salted hash of it is ever sent, as `pk`. */
  partitionKey?: string;
  /** What the quota counts; `requests` when omitted. */
  unit?: QuotaUnit;
}

/**
 * Which header fields to write:
 * - `draft-10`: `RateLimit-Policy: "api";q=100;w=60;pk=:…:` and `RateLimit: "api";r=50;t=30;pk=:…:`, one item
 *   per policy (draft-ietf-httpapi-ratelimit-headers-10);
 * - `draft-7`: `RateLimit-Policy: 100;w=60` and `RateLimit: limit=100, remaining=50, reset=30`;
 * - `draft-6`: `RateLimit-Policy` as draft-7, and `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset`;
 * - `legacy`: `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset` (Unix time in seconds).
 *
 * The single-policy shapes (draft-7's `RateLimit`, draft-6, legacy) report the policy with the fewest permits
 * left; `RateLimit-Policy` lists every policy. The drafts share field names, so use at most one of them.
 */
export type HeaderStyle = 'draft-10' | 'draft-7' | 'draft-6' | 'legacy';

/** Options of {@link rateLimitHeaders}. */
export interface RateLimitHeadersOptions {
  /** The wall-clock time in milliseconds, for `X-RateLimit-Reset`. Default `Date.now()`. */
  now?: number;
  /** Hashes partition keys into `pk` values. Default: a hasher with a per-process random salt. */
  partitionKeys?: PartitionKeyHasher;
}

/** Structured Field integers have at most 15 digits. */
const SF_MAX_INTEGER = 999_999_999_999_999;
/** The largest Retry-After we send (about 68 years): beyond it clients overflow. */
const MAX_RETRY_AFTER_SECONDS = 2_147_483_647;

/**
 * The rate-limit header fields for the given policy states, in the given styles, as `[name, value]` pairs.
 * No fields when `states` is empty.
 *
 * @example
 * rateLimitHeaders([{ name: 'api', limit: 100, windowMs: 60_000, remaining: 50, resetAfterMs: 30_000 }], ['draft-10']);
 * // [['RateLimit-Policy', '"api";q=100;w=60'], ['RateLimit', '"api";r=50;t=30']]
 */
export function rateLimitHeaders(
  states: readonly PolicyState[],
  styles: readonly HeaderStyle[],
  options: RateLimitHeadersOptions = {},
): Array<[name: string, value: string]> {
  const fields: Array<[string, string]> = [];
  if (states.length === 0) return fields;
  for (const style of styles) {
    if (style === 'draft-10') draft10(states, options.partitionKeys ?? defaultHasher(), fields);
    else if (style === 'draft-7') draft7(states, fields);
    else if (style === 'draft-6') draft6(states, fields);
    else if (style === 'legacy') legacy(tightest(states), options.now ?? Date.now(), fields);
  }
  return fields;
}

function draft10(
  states: readonly PolicyState[],
  hash: PartitionKeyHasher,
  fields: Array<[string, string]>,
): void {
  let policies = '';
  let limits = '';
  for (const state of states) {
    const name = sfString(state.name);
    const pk = state.partitionKey === undefined ? '' : `;pk=:${hash(state.partitionKey)}:`;
    const unit = state.unit === undefined || state.unit === 'requests' ? '' : `;qu=${sfString(state.unit)}`;
    const window = windowSeconds(state.windowMs);
    const reset = resetSeconds(state.resetAfterMs);
    const separator = policies === '' ? '' : ', ';
    policies += `${separator}${name};q=${sfInteger(state.limit)}${unit}${window === undefined ? '' : `;w=${window}`}${pk}`;
    limits += `${separator}${name};r=${sfInteger(state.remaining)}${reset === undefined ? '' : `;t=${reset}`}${pk}`;
  }
  fields.push(['RateLimit-Policy', policies], ['RateLimit', limits]);
}

function draft7(states: readonly PolicyState[], fields: Array<[string, string]>): void {
  const state = tightest(states);
  const reset = resetSeconds(state.resetAfterMs);
  fields.push(
    ['RateLimit-Policy', olderDraftPolicies(states)],
    [
      'RateLimit',
      `limit=${sfInteger(state.limit)}, remaining=${sfInteger(state.remaining)}${reset === undefined ? '' : `, reset=${reset}`}`,
    ],
  );
}

function draft6(states: readonly PolicyState[], fields: Array<[string, string]>): void {
  const state = tightest(states);
  const reset = resetSeconds(state.resetAfterMs);
  fields.push(
    ['RateLimit-Policy', olderDraftPolicies(states)],
    ['RateLimit-Limit', String(sfInteger(state.limit))],
    ['RateLimit-Remaining', String(sfInteger(state.remaining))],
  );
  if (reset !== undefined) fields.push(['RateLimit-Reset', String(reset)]);
}

function legacy(state: PolicyState, now: number, fields: Array<[string, string]>): void {
  fields.push(
    ['X-RateLimit-Limit', String(sfInteger(state.limit))],
    ['X-RateLimit-Remaining', String(sfInteger(state.remaining))],
  );
  const ms = state.resetAfterMs;
  if (ms !== undefined && Number.isFinite(ms)) {
    fields.push(['X-RateLimit-Reset', String(sfInteger(Math.ceil((now + Math.max(0, ms)) / 1000)))]);
  }
}

/** Drafts 6 and 7: `100;w=60, 1000;w=3600`. */
function olderDraftPolicies(states: readonly PolicyState[]): string {
  let value = '';
  for (const state of states) {
    const window = windowSeconds(state.windowMs);
    value += `${value === '' ? '' : ', '}${sfInteger(state.limit)}${window === undefined ? '' : `;w=${window}`}`;
  }
  return value;
}

/** The policy a client will hit first: the fewest permits left, then the longest wait. */
function tightest(states: readonly PolicyState[]): PolicyState {
  let best = states[0];
  for (let i = 1; i < states.length; i++) {
    const state = states[i];
    if (
      state.remaining < best.remaining ||
      (state.remaining === best.remaining && (state.resetAfterMs ?? -1) > (best.resetAfterMs ?? -1))
    ) {
      best = state;
    }
  }
  return best;
}

/**
 * Seconds until a retry can succeed, for `Retry-After`: `max(1, ceil(ms / 1000))`. Never 0, which many
 * clients read as "retry now" and turn into a busy loop; `NaN` and negative values give 1.
 */
export function retryAfterSeconds(ms: number): number {
  if (!(ms > 0)) return 1;
  return Math.min(MAX_RETRY_AFTER_SECONDS, Math.max(1, Math.ceil(ms / 1000)));
}

/** `t`: whole seconds, rounded up so that a client never comes back before the quota does. */
function resetSeconds(ms: number | undefined): number | undefined {
  if (ms === undefined || !Number.isFinite(ms)) return undefined;
  return sfInteger(Math.ceil(ms / 1000));
}

/** `w` must be a positive integer (§3.1.3): a sub-second window reports as 1. */
function windowSeconds(ms: number | undefined): number | undefined {
  if (ms === undefined || !Number.isFinite(ms) || ms <= 0) return undefined;
  return sfInteger(Math.max(1, Math.ceil(ms / 1000)));
}

function sfInteger(value: number): number {
  if (Number.isNaN(value) || value <= 0) return 0;
  return value >= SF_MAX_INTEGER ? SF_MAX_INTEGER : Math.floor(value);
}

/**
 * Serialises a Structured Field string (RFC 9651 §3.3.3): printable ASCII only, `"` and `\` escaped. Other
 * characters (controls, non-ASCII) are dropped rather than failing the response.
 */
export function sfString(text: string): string {
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code < 0x20 || code > 0x7e || code === 0x22 || code === 0x5c) return `"${escapeSfString(text)}"`;
  }
  return `"${text}"`;
}

function escapeSfString(text: string): string {
  let escaped = '';
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code === 0x22 || code === 0x5c) escaped += `\\${text[i]}`;
    else if (code >= 0x20 && code <= 0x7e) escaped += text[i];
  }
  return escaped;
}

/** Turns a partition key into the base64 of a `pk` Byte Sequence. */
export type PartitionKeyHasher = (key: string) => string;

/** Options of {@link partitionKeyHasher}. */
export interface PartitionKeyHasherOptions {
  /**
   * The salt, at least 16 characters. Default: 32 random bytes per process, so `pk` values differ between processes. Share a secret
   * between the instances behind one load balancer if clients should see one `pk` per partition.
   */
  secret?: string;
  /** Hashes remembered; the cache is emptied when full. Default 4096. */
  cacheSize?: number;
}

/** Every option name of {@link PartitionKeyHasherOptions}: any other is refused. */
export const PARTITION_KEY_HASHER_OPTION_NAMES = [
  'secret',
  'cacheSize',
] as const satisfies readonly (keyof PartitionKeyHasherOptions)[];

/** The shortest secret accepted: 16 characters. */
export const MIN_SECRET_LENGTH = 16;

/**
 * Checks a secret salt for option `name`. The message never shows the secret, only its type or length: error
 * messages end up in logs.
 */
export function checkSecret(name: string, secret: unknown): void {
  if (typeof secret !== 'string') {
    throw new TypeError(
      `${name} must be a string of at least ${MIN_SECRET_LENGTH} characters; got ${typeof secret}`,
    );
  }
  if (secret.length < MIN_SECRET_LENGTH) {
    throw new RangeError(
      `${name} must be at least ${MIN_SECRET_LENGTH} characters long; got ${secret.length} (the secret is not shown)`,
    );
  }
}

/**
 * Creates a `pk` hasher: the first 12 bytes of SHA-256 over a secret salt and the key, in base64. The key never
 * leaves the process, and without the salt a client cannot test guesses (an IPv4 key would otherwise be found
 * by hashing all 2^32 addresses). Publishing 96 of 256 bits leaves nothing to extend.
 */
export function partitionKeyHasher(options: PartitionKeyHasherOptions = {}): PartitionKeyHasher {
  rejectUnknown('partitionKeyHasher', options, PARTITION_KEY_HASHER_OPTION_NAMES);
  const { secret, cacheSize = 4096 } = options;
  if (secret !== undefined) checkSecret('partitionKeyHasher: secret', secret);
  if (!Number.isInteger(cacheSize) || cacheSize < 0) {
    throw new RangeError(
      `partitionKeyHasher: cacheSize must be a non-negative integer; got ${describe(cacheSize)}`,
    );
  }
  const salt = secret ?? crypto.randomBytes(32).toString('base64');
  const cache = new Map<string, string>();
  return (key) => {
    let hashed = cache.get(key);
    if (hashed === undefined) {
      // 12 bytes are 16 base64 characters with no padding: a prefix of the full digest's base64.
      hashed = ownText(sha256Base64(salt + key).slice(0, 16));
      if (cache.size >= cacheSize) cache.clear();
      // Owned text: a key cut from a request header would otherwise keep the whole header alive.
      if (cacheSize > 0) cache.set(ownText(key), hashed);
    }
    return hashed;
  };
}

/** `crypto.hash` is the one-shot form (Node 20.12+), several times faster than `createHash` per call. */
const sha256Base64: (text: string) => string =
  typeof crypto.hash === 'function'
    ? (text) => crypto.hash('sha256', text, 'base64')
    : (text) => crypto.createHash('sha256').update(text).digest('base64');

let processHasher: PartitionKeyHasher | undefined;

function defaultHasher(): PartitionKeyHasher {
  processHasher ??= partitionKeyHasher();
  return processHasher;
}

/** The problem type of draft-ietf-httpapi-ratelimit-headers-10 §5.1. */
export const QUOTA_EXCEEDED_TYPE = 'https://iana.org/assignments/http-problem-types#quota-exceeded';

/** Options of {@link rejectionBody}. */
export interface RejectionBodyOptions {
  /** `text` (default) or `problem+json` (RFC 9457, with the draft's `quota-exceeded` type). */
  format?: 'text' | 'problem+json';
  /** The response status, for the problem's `status` member. Default 429. */
  status?: number;
  /** When a retry can succeed, if known. */
  retryAfterMs?: number;
  /** The names of the policies that rejected the request, for `violated-policies`. */
  policies?: readonly string[];
}

/** A response body and its `Content-Type`. */
export interface RejectionBody {
  contentType: string;
  body: string;
}

/**
 * The body of a rejected request: a short text by default, or an `application/problem+json` document of the
 * draft's `quota-exceeded` type.
 *
 * @example
 * rejectionBody({ format: 'problem+json', retryAfterMs: 30_000, policies: ['api'] });
 */
export function rejectionBody(options: RejectionBodyOptions = {}): RejectionBody {
  const { format = 'text', status = 429, retryAfterMs, policies } = options;
  const seconds = retryAfterMs === undefined ? undefined : retryAfterSeconds(retryAfterMs);
  const detail =
    seconds === undefined
      ? 'Too many requests.'
      : `Too many requests. Try again in ${seconds} second${seconds === 1 ? '' : 's'}.`;
  if (format === 'text') return { contentType: 'text/plain; charset=utf-8', body: detail };
  const problem: Record<string, unknown> = {
    type: QUOTA_EXCEEDED_TYPE,
    title: 'Quota Exceeded',
    status,
    detail,
  };
  if (policies !== undefined && policies.length > 0) problem['violated-policies'] = [...policies];
  return { contentType: 'application/problem+json', body: JSON.stringify(problem) };
}

const STYLES: readonly HeaderStyle[] = ['draft-10', 'draft-7', 'draft-6', 'legacy'];

/**
 * Validates a header-style option (one style or a list) at construction: known styles, no repeats, at most one
 * of the drafts (they write different values under the same field names). Throws a `TypeError` naming `option`.
 */
export function parseHeaderStyles(option: string, value: unknown): HeaderStyle[] {
  const list = typeof value === 'string' ? [value] : value;
  const expected = `one of ${STYLES.map((style) => `'${style}'`).join(', ')}, or a list of them`;
  if (!Array.isArray(list)) throw new TypeError(`${option} must be ${expected}; got ${describe(value)}`);
  const styles: HeaderStyle[] = [];
  for (const style of list) {
    if (!STYLES.includes(style)) throw new TypeError(`${option} must be ${expected}; got ${describe(style)}`);
    if (styles.includes(style)) throw new TypeError(`${option} lists ${describe(style)} twice`);
    styles.push(style);
  }
  if (styles.filter((style) => style !== 'legacy').length > 1) {
    throw new TypeError(
      `${option} may hold one IETF draft (they share field names); got ${styles.join(', ')}`,
    );
  }
  return styles;
}
