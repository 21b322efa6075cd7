import { parseRateLimit, retryAfterMs } from '../fetch/headers.ts';
import { providerQuotas, retryAfterMsField } from '../fetch/provider-headers.ts';

/**
 * Reading the rate-limit fields servers send, in every dialect found in the wild, into one shape:
 * - `draft-10`: `RateLimit: "api";r=50;t=30` and `RateLimit-Policy: "api";q=100;w=60` (IETF
 *   draft-ietf-httpapi-ratelimit-headers, drafts 8 onwards; express-rate-limit's `draft-8`);
 * - `draft-7`: `RateLimit: limit=100, remaining=50, reset=30` and `RateLimit-Policy: 100;w=60`;
 * - `draft-6`: `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset` (seconds);
 * - `x-ratelimit`: `X-RateLimit-Limit`, `-Remaining`, `-Reset` (and `X-Rate-Limit-*`), the reset in seconds from
 *   now, Unix seconds (GitHub) or Unix milliseconds;
 * - `openai`: `x-ratelimit-limit|remaining|reset-requests|tokens`, the reset a duration (`6m0s`);
 * - `anthropic`: `anthropic-ratelimit-<unit>-limit|remaining|reset` for requests, tokens, input and output tokens,
 *   the reset an RFC 3339 time;
 * plus `Retry-After` (seconds or an HTTP-date) and `retry-after-ms`, which wins when both are there.
 */

export type Dialect = 'draft-10' | 'draft-7' | 'draft-6' | 'x-ratelimit' | 'openai' | 'anthropic';

/** One quota as a response reported it. Every number is what the server sent, when it sent it. */
export interface Quota {
  dialect: Dialect;
  /** The policy's name, where the dialect has one (draft-10), or the unit (openai, anthropic: `tokens`…). */
  policy?: string;
  limit?: number;
  remaining?: number;
  /** Milliseconds until the quota resets, from the response. */
  resetMs?: number;
  windowMs?: number;
}

/** What one response said about rate limits. */
export interface RateLimitReading {
  quotas: Quota[];
  retryAfterMs?: number;
}

type Headers = Record<string, string | string[] | undefined>;

const field = (headers: Headers, name: string): string | undefined => {
  const value = headers[name];
  return Array.isArray(value) ? value.join(', ') : value;
};

/** Unix times in seconds are above this (September 2001); a reset in seconds from now is below it. */
const EPOCH_SECONDS = 1e9;
/** Unix times in milliseconds are above this. */
const EPOCH_MS = 1e12;

/**
 * Reads every rate-limit field of a response (`headers` with lower-case names, as node:http gives them).
 * `now` is the local wall-clock time in milliseconds, for absolute resets when the response has no `Date`.
 */
export function readRateLimit(headers: Headers, now: number): RateLimitReading {
  const quotas: Quota[] = [];
  const date = field(headers, 'date');
  const origin = (date === undefined ? undefined : Date.parse(date)) || now;
  const ratelimit = field(headers, 'ratelimit');
  const policies = policyItems(field(headers, 'ratelimit-policy'));
  if (ratelimit !== undefined) {
    const items = parseRateLimit(ratelimit);
    if (items !== undefined) {
      for (const item of items) {
        const policy = policies.find((p) => p.name === item.policy);
        quotas.push(
          strip({
            dialect: 'draft-10',
            policy: item.policy,
            limit: policy?.params.q,
            remaining: item.remaining,
            resetMs: seconds(item.resetSeconds),
            windowMs: seconds(policy?.params.w),
          }),
        );
      }
    } else {
      const dictionary = policyItems(ratelimit);
      const values = Object.fromEntries(dictionary.map((item) => [item.name, item.value]));
      if ('remaining' in values || 'limit' in values) {
        quotas.push(
          strip({
            dialect: 'draft-7',
            limit: values.limit,
            remaining: values.remaining,
            resetMs: seconds(values.reset),
            windowMs: seconds(policies[0]?.params.w),
          }),
        );
      }
    }
  }
  const draft6 = numbers(headers, 'ratelimit-');
  if (draft6 !== undefined) {
    quotas.push(
      strip({
        dialect: 'draft-6',
        ...draft6,
        resetMs: seconds(draft6.reset),
        reset: undefined,
        windowMs: ratelimit === undefined ? seconds(policies[0]?.params.w) : undefined,
      }),
    );
  }
  for (const prefix of ['x-ratelimit-', 'x-rate-limit-']) {
    const legacy = numbers(headers, prefix);
    if (legacy === undefined) continue;
    const reset = legacy.reset;
    let resetMs: number | undefined;
    if (reset !== undefined) {
      if (reset >= EPOCH_MS) resetMs = Math.max(0, reset - origin);
      else if (reset >= EPOCH_SECONDS) resetMs = Math.max(0, reset * 1000 - origin);
      else resetMs = reset * 1000;
    }
    quotas.push(strip({ dialect: 'x-ratelimit', ...legacy, reset: undefined, resetMs }));
    break;
  }
  for (const q of providerQuotas((name) => field(headers, name), now, origin)) {
    quotas.push(
      strip({
        dialect: q.provider,
        policy: q.unit,
        limit: q.limit,
        remaining: q.remaining,
        resetMs: q.resetMs,
      }),
    );
  }
  const reading: RateLimitReading = { quotas };
  const retry =
    retryAfterMsField(field(headers, 'retry-after-ms')) ??
    retryAfterMs(field(headers, 'retry-after'), now, date);
  if (retry !== undefined) reading.retryAfterMs = retry;
  return reading;
}

/** `<prefix>limit`, `<prefix>remaining`, `<prefix>reset` as non-negative numbers, if any is there. */
function numbers(headers: Headers, prefix: string) {
  const read = (name: string) => {
    const text = field(headers, prefix + name)?.trim();
    // Some servers repeat the field ("100, 100"): the first value counts.
    const first = text?.split(',')[0].trim();
    return first !== undefined && /^\d+(\.\d+)?$/.test(first) ? Number(first) : undefined;
  };
  const limit = read('limit');
  const remaining = read('remaining');
  const reset = read('reset');
  if (limit === undefined && remaining === undefined && reset === undefined) return undefined;
  return { limit, remaining, reset };
}

/** Items of a list (`"api";q=100;w=60, 100;w=60`) or members of a dictionary (`limit=100, reset=30`). */
function policyItems(value: string | undefined) {
  const items: Array<{ name: string; value?: number; params: Record<string, number> }> = [];
  if (value === undefined) return items;
  for (const text of splitOutsideQuotes(value, ',')) {
    const [head, ...params] = splitOutsideQuotes(text, ';');
    const [name, bare] = head.split('=', 2).map((s) => s.trim());
    const item = { name: unquote(name), value: integer(bare), params: {} as Record<string, number> };
    for (const param of params) {
      const [key, v] = param.split('=', 2).map((s) => s.trim());
      const n = integer(v);
      if (n !== undefined) item.params[key] = n;
    }
    items.push(item);
  }
  return items;
}

function splitOutsideQuotes(text: string, separator: string): string[] {
  const parts: string[] = [];
  let quoted = false;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    if (text[i] === '"' && text[i - 1] !== '\\') quoted = !quoted;
    else if (!quoted && text[i] === separator) {
      parts.push(text.slice(start, i).trim());
      start = i + 1;
    }
  }
  parts.push(text.slice(start).trim());
  return parts.filter((part) => part !== '');
}

const unquote = (text: string) =>
  text.startsWith('"') && text.endsWith('"') ? text.slice(1, -1).replace(/\\(["\\])/g, '$1') : text;

const integer = (text: string | undefined) =>
  text !== undefined && /^\d{1,15}$/.test(text) ? Number(text) : undefined;

const seconds = (value: number | undefined) => (value === undefined ? undefined : value * 1000);

/** Drops the fields that are `undefined`, so readings compare and print cleanly. */
function strip<T extends object>(value: T): Quota {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as unknown as Quota;
}
