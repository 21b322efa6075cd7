import { bareAddress } from './ip-address.ts';

/**
 * Forwarded headers (`X-Forwarded-For`, RFC 7239 `Forwarded`) read from the right, entry by entry, without
 * splitting the whole header: what `clientIp()` walks when the socket peer is a trusted proxy.
 */

/** The longest header entry looked at; a `Forwarded` element may carry `by=`, `host=` and `proto=` too. */
const MAX_ELEMENT_LENGTH = 512;
const COMMA = 44;

export function xffAddress(entry: string): string | undefined {
  return bareAddress(entry.trim());
}

/**
 * The address of one RFC 7239 `Forwarded` element (`for=192.0.2.60;proto=http`,
 * `for="[2001:db8:cafe::17]:4711"`), or undefined when it has no `for=` or more than one, or an unreadable one.
 */
export function forwardedAddress(element: string): string | undefined {
  let value: string | undefined;
  let start = 0;
  while (start <= element.length) {
    let end = element.indexOf(';', start);
    if (end < 0) end = element.length;
    const pair = element.slice(start, end).trim();
    if (pair.length > 4 && pair.charCodeAt(3) === 61 /* = */ && pair.slice(0, 3).toLowerCase() === 'for') {
      if (value !== undefined) return undefined;
      value = pair.slice(4);
    }
    start = end + 1;
  }
  if (value === undefined) return undefined;
  if (value.charCodeAt(0) === 34 /* " */) {
    // A quoted address never needs an escape; one that has an escape or a stray quote is not an address.
    if (value.length < 2 || value.charCodeAt(value.length - 1) !== 34) return undefined;
    value = value.slice(1, -1);
  }
  if (value.includes('"') || value.includes('\\')) return undefined;
  return bareAddress(value);
}

/**
 * Reads a header's comma-separated entries from the right, across header lines (the last line first), without
 * splitting the whole header: only the few rightmost entries matter, and a client may send megabytes.
 * Splitting on every comma, even inside a quoted string, is deliberate: the entries our proxies append on the
 * right hold no commas, so a client's unbalanced quote on the left cannot swallow them.
 */
export class EntriesFromRight {
  private readonly lines: readonly string[];
  private line: number;
  private end: number;

  constructor(value: string | string[]) {
    this.lines = typeof value === 'string' ? [value] : value;
    this.line = this.lines.length - 1;
    this.end = this.line >= 0 ? this.lines[this.line].length : 0;
  }

  /** The next entry leftwards (possibly empty; `''` too when longer than we read), or undefined at the start. */
  next(): string | undefined {
    if (this.line < 0) return undefined;
    const text = this.lines[this.line];
    const stop = Math.max(0, this.end - MAX_ELEMENT_LENGTH - 1);
    let i = this.end - 1;
    while (i >= stop && text.charCodeAt(i) !== COMMA) i--;
    if (i < 0 || text.charCodeAt(i) === COMMA) {
      const entry = text.slice(i + 1, this.end);
      if (i >= 0) {
        this.end = i;
      } else {
        this.line--;
        this.end = this.line >= 0 ? this.lines[this.line].length : 0;
      }
      return entry;
    }
    this.line = -1;
    return '';
  }
}
