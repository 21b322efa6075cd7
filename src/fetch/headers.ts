/**
 * Reading how long a server asks us to wait: `Retry-After` (RFC 9110 §10.2.3) and the `RateLimit` field of
 * draft-ietf-httpapi-ratelimit-headers-10. Every parser here is strict and returns `undefined` for anything it
 * does not fully understand: a malformed field is ignored, never guessed at (RFC 9651 §4.2 and the draft require
 * a recipient to ignore a field that fails to parse).
 */

const DELAY_SECONDS = /^\d+$/;
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const DAY = '(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)';
const LONG_DAY = '(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)';
const MONTH = '(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)';
const TIME = '(\\d\\d):(\\d\\d):(\\d\\d)';
/** `Sun, 06 Nov 1994 08:49:37 GMT`, the preferred form. */
const IMF_FIXDATE = new RegExp(`^${DAY}, (\\d\\d) ${MONTH} (\\d{4}) ${TIME} GMT$`);
/** `Sunday, 06-Nov-94 08:49:37 GMT`, obsolete but still to be accepted (RFC 9110 §5.6.7). */
const RFC850_DATE = new RegExp(`^${LONG_DAY}, (\\d\\d)-${MONTH}-(\\d\\d) ${TIME} GMT$`);
/** `Sun Nov  6 08:49:37 1994`, C's asctime(), obsolete likewise. */
const ASCTIME_DATE = new RegExp(`^${DAY} ${MONTH} ([ \\d]\\d) ${TIME} (\\d{4})$`);

/**
 * Parses an HTTP-date in any of its three forms to milliseconds since the epoch, or `undefined`. `Date.parse`
 * is not used: it accepts almost anything (`Date.parse('1')` is a day in 2001).
 */
export function parseHttpDate(value: string): number | undefined {
  let m = IMF_FIXDATE.exec(value);
  if (m) return utc(Number(m[3]), m[2], Number(m[1]), m[4], m[5], m[6]);
  m = RFC850_DATE.exec(value);
  if (m) {
    // Two-digit years: RFC 9110 says a date more than 50 years ahead is in the past century.
    let year = 2000 + Number(m[3]);
    if (year > new Date().getUTCFullYear() + 50) year -= 100;
    return utc(year, m[2], Number(m[1]), m[4], m[5], m[6]);
  }
  m = ASCTIME_DATE.exec(value);
  if (m) return utc(Number(m[6]), m[1], Number(m[2].trim()), m[3], m[4], m[5]);
  return undefined;
}

function utc(
  year: number,
  month: string,
  day: number,
  h: string,
  min: string,
  s: string,
): number | undefined {
  const hours = Number(h);
  const minutes = Number(min);
  const seconds = Number(s);
  if (day < 1 || day > 31 || hours > 23 || minutes > 59 || seconds > 60) return undefined;
  const ms = Date.UTC(year, MONTHS.indexOf(month), day, hours, minutes, Math.min(seconds, 59));
  // Date.UTC rolls 31 Feb over into March: such a date is malformed.
  return new Date(ms).getUTCDate() === day ? ms : undefined;
}

/**
 * The wait a `Retry-After` value asks for, in milliseconds, or `undefined` when it is absent or malformed.
 * `delay-seconds` is whole, non-negative seconds (`1.5`, `-3`, `+3` are malformed). An HTTP-date is measured
 * against the response's own `Date` when that parses (so a skewed local clock does not matter), else `now`.
 */
export function retryAfterMs(
  value: string | null | undefined,
  now: number,
  responseDate?: string | null,
): number | undefined {
  if (value == null) return undefined;
  const text = value.trim();
  if (DELAY_SECONDS.test(text)) {
    const seconds = Number(text);
    return Number.isSafeInteger(seconds) ? seconds * 1000 : undefined;
  }
  const at = parseHttpDate(text);
  if (at === undefined) return undefined;
  const origin = responseDate == null ? undefined : parseHttpDate(responseDate.trim());
  return Math.max(0, at - (origin ?? now));
}

/** One item of the `RateLimit` field: its policy name and the `r` (remaining) and `t` (seconds) parameters. */
export interface RateLimitItem {
  policy: string;
  remaining: number | undefined;
  resetSeconds: number | undefined;
}

const TOKEN = /^[A-Za-z*][\w!#$%&'*+\-.^`|~:/]*/;
const KEY = /^[a-z*][a-z0-9_\-.*]*/;
const INTEGER = /^-?\d{1,15}(?![\d.])/;
const DECIMAL = /^-?\d{1,12}\.\d{1,3}(?![\d.])/;

/**
 * Parses a `RateLimit` field value (`"api";r=0;t=30, "burst";r=5;t=1`) as a Structured Field List of items
 * with parameters (RFC 9651), keeping what the draft defines. Returns `undefined` when any part fails to parse,
 * since the whole field must then be ignored. Inner lists, byte sequences and other bare items are skipped
 * as the grammar allows; only the string or token naming the policy is kept.
 */
export function parseRateLimit(value: string | null | undefined): RateLimitItem[] | undefined {
  if (value == null) return undefined;
  const items: RateLimitItem[] = [];
  let rest = value.replace(/^[ \t]+|[ \t]+$/g, '');
  if (rest === '') return undefined;
  while (true) {
    const policy = bareName(rest);
    if (policy === undefined) return undefined;
    rest = rest.slice(policy.length);
    const item: RateLimitItem = { policy: unquote(policy), remaining: undefined, resetSeconds: undefined };
    const seen = new Set<string>();
    while (rest.startsWith(';')) {
      rest = rest.slice(1).replace(/^ +/, '');
      const key = KEY.exec(rest)?.[0];
      if (key === undefined) return undefined;
      rest = rest.slice(key.length);
      let param: number | boolean | string = true;
      if (rest.startsWith('=')) {
        rest = rest.slice(1);
        const bare = bareValue(rest);
        if (bare === undefined) return undefined;
        rest = rest.slice(bare.text.length);
        param = bare.value;
      }
      // A repeated parameter's last value wins (RFC 9651 §4.2.3.2).
      seen.add(key);
      if (key === 'r') item.remaining = nonNegativeInteger(param);
      else if (key === 't') item.resetSeconds = nonNegativeInteger(param);
    }
    if (seen.has('r') && item.remaining === undefined) return undefined;
    if (seen.has('t') && item.resetSeconds === undefined) return undefined;
    items.push(item);
    rest = rest.replace(/^[ \t]+/, '');
    if (rest === '') return items;
    if (!rest.startsWith(',')) return undefined;
    rest = rest.slice(1).replace(/^[ \t]+/, '');
    if (rest === '') return undefined; // a trailing comma is an error
  }
}

/** The policy name: an sf-string or a token. */
function bareName(text: string): string | undefined {
  if (text.startsWith('"')) return sfStringText(text);
  return TOKEN.exec(text)?.[0];
}

/** A parameter value: integer, decimal, string, token or boolean. */
function bareValue(text: string): { text: string; value: number | boolean | string } | undefined {
  const decimal = DECIMAL.exec(text)?.[0];
  // Kept as text: a decimal is never a valid `r` or `t`, even `30.0`.
  if (decimal !== undefined) return { text: decimal, value: decimal };
  const integer = INTEGER.exec(text)?.[0];
  if (integer !== undefined) return { text: integer, value: Number(integer) };
  if (text.startsWith('?1')) return { text: '?1', value: true };
  if (text.startsWith('?0')) return { text: '?0', value: false };
  if (text.startsWith('"')) {
    const quoted = sfStringText(text);
    return quoted === undefined ? undefined : { text: quoted, value: unquote(quoted) };
  }
  if (text.startsWith(':')) {
    const end = text.indexOf(':', 1);
    if (end < 0 || !/^[A-Za-z0-9+/=]*$/.test(text.slice(1, end))) return undefined;
    return { text: text.slice(0, end + 1), value: text.slice(1, end) };
  }
  const token = TOKEN.exec(text)?.[0];
  return token === undefined ? undefined : { text: token, value: token };
}

/** The source text of a quoted sf-string at the start of `text`, quotes included. */
function sfStringText(text: string): string | undefined {
  for (let i = 1; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code === 0x5c) {
      const next = text[i + 1];
      if (next !== '"' && next !== '\\') return undefined;
      i++;
    } else if (code === 0x22) return text.slice(0, i + 1);
    else if (code < 0x20 || code > 0x7e) return undefined;
  }
  return undefined;
}

function unquote(text: string): string {
  return text.startsWith('"') ? text.slice(1, -1).replace(/\\(["\\])/g, '$1') : text;
}

function nonNegativeInteger(value: number | boolean | string): number | undefined {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : undefined;
}

/**
 * The wait a `RateLimit` field asks for on a refused request: the longest `t` among the policies with no quota
 * left (`r=0`), in milliseconds. `undefined` when the field is absent, malformed, or names no exhausted policy
 * with a reset time.
 */
export function rateLimitWaitMs(value: string | null | undefined): number | undefined {
  const items = parseRateLimit(value);
  if (items === undefined) return undefined;
  let wait: number | undefined;
  for (const item of items) {
    if (item.remaining !== 0 || item.resetSeconds === undefined) continue;
    wait = Math.max(wait ?? 0, item.resetSeconds * 1000);
  }
  return wait;
}
