/**
 * The rate-limit fields of LLM providers, read as strictly as `headers.ts` reads `RateLimit` and `Retry-After`:
 * a value not fully understood is `undefined`, never a guess.
 * - OpenAI-style: `x-ratelimit-limit-<unit>`, `x-ratelimit-remaining-<unit>`, `x-ratelimit-reset-<unit>` for the
 *   units `requests` and `tokens`, the reset a duration until the quota is full again (`6m0s`, `1.5s`, `20ms`);
 * - Anthropic-style: `anthropic-ratelimit-<unit>-limit|remaining|reset` for `requests`, `tokens`,
 *   `input-tokens` and `output-tokens`, the reset an RFC 3339 time;
 * - `retry-after-ms`: milliseconds, a non-negative number (both providers send it beside `Retry-After`).
 */

/** One unit's quota as a provider reported it. */
export interface ProviderQuota {
  /** Whose fields: `'openai'` (`x-ratelimit-*-<unit>`) or `'anthropic'` (`anthropic-ratelimit-<unit>-*`). */
  readonly provider: 'openai' | 'anthropic';
  readonly unit: string;
  readonly limit: number | undefined;
  readonly remaining: number | undefined;
  /** Milliseconds until the quota resets, from the response. */
  readonly resetMs: number | undefined;
  /**
   * The precision of `resetMs`: the reset may come up to this much later than it says (`6m0s` is whole seconds,
   * `1.234s` milliseconds; an RFC 3339 time without a fraction is whole seconds). 0 without a reset.
   */
  readonly resetPrecisionMs: number;
}

type Header = (name: string) => string | null | undefined;

const OPENAI_UNITS = ['requests', 'tokens'];
const ANTHROPIC_UNITS = ['requests', 'tokens', 'input-tokens', 'output-tokens'];
const COUNT = /^\d{1,15}$/;
const NUMBER = /^\d{1,15}(?:\.\d{1,6})?$/;
/** Go's time.Duration text as OpenAI sends it: hours, minutes, seconds, milliseconds, each optional, in order. */
const DURATION =
  /^(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m(?!s))?(?:(\d+(?:\.\d+)?)s)?(?:(\d+(?:\.\d+)?)ms)?$/;
const RFC3339 = /^(\d{4})-(\d\d)-(\d\d)[Tt](\d\d):(\d\d):(\d\d)(\.\d{1,9})?(?:[Zz]|([+-])(\d\d):(\d\d))$/;

/** A duration such as `6m0s`, `1.5s`, `20ms`, `1h2m3s` in milliseconds, or `undefined`. */
export function parseProviderDuration(value: string | null | undefined): number | undefined {
  const text = value?.trim();
  if (!text) return undefined;
  const m = DURATION.exec(text);
  if (!m || (m[1] ?? m[2] ?? m[3] ?? m[4]) === undefined) return undefined;
  const part = (s: string | undefined, ms: number) => (s === undefined ? 0 : Number(s) * ms);
  return part(m[1], 3_600_000) + part(m[2], 60_000) + part(m[3], 1000) + part(m[4], 1);
}

/**
 * The precision of a provider's reset, in milliseconds: the unit of its last digit (`6m0s` → 1000, `1.25s` → 10,
 * `20ms` → 1; an RFC 3339 time: its fraction's last digit, else whole seconds), or 0 when it does not parse.
 */
export function resetPrecisionMs(value: string | null | undefined, rfc3339: boolean): number {
  const text = value?.trim() ?? '';
  if (rfc3339) {
    const m = RFC3339.exec(text);
    return m === null ? 0 : m[7] === undefined ? 1000 : 1000 / 10 ** Math.min(3, m[7].length - 1);
  }
  const m = /(\d+)(?:\.(\d+))?(h|ms|m|s)$/.exec(text);
  if (m === null || parseProviderDuration(text) === undefined) return 0;
  const unit = { h: 3_600_000, m: 60_000, s: 1000, ms: 1 }[m[3] as 'h' | 'm' | 's' | 'ms'];
  return Math.max(1, unit / 10 ** (m[2]?.length ?? 0));
}

/** An RFC 3339 date-time (`2026-12-06T02:15:30Z`, offsets and fractions allowed) in epoch ms, or `undefined`. */
export function parseRfc3339(value: string | null | undefined): number | undefined {
  const m = value == null ? null : RFC3339.exec(value.trim());
  if (!m) return undefined;
  const [year, month, day, hours, minutes, seconds] = m.slice(1, 7).map(Number);
  if (month < 1 || month > 12 || day < 1 || day > 31 || hours > 23 || minutes > 59 || seconds > 60)
    return undefined;
  let ms = Date.UTC(year, month - 1, day, hours, minutes, Math.min(seconds, 59));
  if (new Date(ms).getUTCDate() !== day) return undefined;
  if (m[7] !== undefined) ms += Math.floor(Number(`0${m[7]}`) * 1000);
  if (m[8] !== undefined) {
    const offset = (Number(m[9]) * 60 + Number(m[10])) * 60_000;
    if (Number(m[9]) > 23 || Number(m[10]) > 59) return undefined;
    ms += m[8] === '+' ? -offset : offset;
  }
  return ms;
}

/** `retry-after-ms` in milliseconds, or `undefined` when absent or malformed. */
export function retryAfterMsField(value: string | null | undefined): number | undefined {
  const text = value?.trim();
  return text !== undefined && NUMBER.test(text) ? Number(text) : undefined;
}

/**
 * Every provider quota a response reports, OpenAI-style and Anthropic-style. An Anthropic reset time is measured
 * against the response's `Date` when it parses (a skewed local clock does not matter), else `now` (epoch ms).
 */
export function providerQuotas(header: Header, now: number, responseDate?: number): ProviderQuota[] {
  const quotas: ProviderQuota[] = [];
  const count = (name: string) => {
    const text = header(name)?.trim();
    return text !== undefined && COUNT.test(text) ? Number(text) : undefined;
  };
  for (const unit of OPENAI_UNITS) {
    const limit = count(`x-ratelimit-limit-${unit}`);
    const remaining = count(`x-ratelimit-remaining-${unit}`);
    const reset = header(`x-ratelimit-reset-${unit}`);
    const resetMs = parseProviderDuration(reset);
    if (limit !== undefined || remaining !== undefined || resetMs !== undefined) {
      const resetPrecision = resetMs === undefined ? 0 : resetPrecisionMs(reset, false);
      quotas.push({ provider: 'openai', unit, limit, remaining, resetMs, resetPrecisionMs: resetPrecision });
    }
  }
  for (const unit of ANTHROPIC_UNITS) {
    const prefix = `anthropic-ratelimit-${unit}-`;
    const limit = count(`${prefix}limit`);
    const remaining = count(`${prefix}remaining`);
    const reset = header(`${prefix}reset`);
    const at = parseRfc3339(reset);
    const resetMs = at === undefined ? undefined : Math.max(0, at - (responseDate ?? now));
    if (limit !== undefined || remaining !== undefined || resetMs !== undefined) {
      const resetPrecision = resetMs === undefined ? 0 : resetPrecisionMs(reset, true);
      quotas.push({
        provider: 'anthropic',
        unit,
        limit,
        remaining,
        resetMs,
        resetPrecisionMs: resetPrecision,
      });
    }
  }
  return quotas;
}

/**
 * The wait the provider fields ask for: the longest reset among the units with nothing left (`remaining` 0), in
 * milliseconds; `undefined` when no unit is exhausted with a reset time.
 */
export function providerWaitMs(header: Header, now: number, responseDate?: number): number | undefined {
  // Read on every answer: only the `remaining` fields, until one says 0.
  let wait: number | undefined;
  for (const unit of OPENAI_UNITS) {
    if (header(`x-ratelimit-remaining-${unit}`)?.trim() !== '0') continue;
    const reset = parseProviderDuration(header(`x-ratelimit-reset-${unit}`));
    if (reset !== undefined) wait = Math.max(wait ?? 0, reset);
  }
  for (const unit of ANTHROPIC_UNITS) {
    if (header(`anthropic-ratelimit-${unit}-remaining`)?.trim() !== '0') continue;
    const at = parseRfc3339(header(`anthropic-ratelimit-${unit}-reset`));
    if (at !== undefined) wait = Math.max(wait ?? 0, Math.max(0, at - (responseDate ?? now)));
  }
  return wait;
}
