import type { BurstOptions } from './args.ts';
import type { Quota, RateLimitReading } from './dialects.ts';
import { type Palette, palette, wrap } from './ui.ts';

/** One request of a burst, as it ended. */
export interface Outcome {
  /** Its place in sending order, from 0. */
  index: number;
  /** Milliseconds from the start of the burst to sending it. */
  sentMs: number;
  /** Milliseconds from sending to the end of the answer (or the failure). */
  ms: number;
  /** The HTTP status, when an answer came. */
  status?: number;
  /** Why no (complete) answer came: `timeout`, an error code such as `ECONNREFUSED`. */
  error?: string;
  reading: RateLimitReading;
}

/** A finished burst. */
export interface BurstResult {
  options: BurstOptions;
  /** In sending order. */
  outcomes: Outcome[];
  elapsedMs: number;
  /** Stopped early (Ctrl-C): `outcomes` holds what was sent until then. */
  interrupted?: boolean;
}

/** The glyph of each kind of outcome; colour adds to it, never replaces it (NO_COLOR, logs). */
const GLYPHS = [
  ['.', '2xx'],
  ['-', '3xx'],
  ['x', '429'],
  ['4', 'other 4xx'],
  ['5', '5xx'],
  ['T', 'timed out'],
  ['~', 'interrupted'],
  ['!', 'no answer (connection failed)'],
] as const;

function cell(outcome: Outcome, paint: Palette): string {
  const { status, error } = outcome;
  if (status === undefined) {
    if (error === 'interrupted') return paint.dim('~');
    return error === 'timeout' ? paint.magenta('T') : paint.red('!');
  }
  if (status === 429) return paint.yellow('x');
  if (status < 300) return paint.green('.');
  if (status < 400) return paint.cyan('-');
  if (status < 500) return paint.red('4');
  return paint.red('5');
}

const GROUP = 10;
/** Lines of cells drawn at most: the first {@link HEAD} and the last {@link TAIL}, and the first 429's. */
const MAX_LINES = 40;
const HEAD = 24;
const TAIL = 8;

/**
 * The status timeline: one cell per request in sending order, ten to a group, as many groups to a line as
 * `width` allows, each line labelled with its first request's number; a caret under the first 429. Past
 * {@link MAX_LINES} lines, the middle lines are summed up in one line (their requests counted by glyph), except
 * the first 429's.
 */
export function renderTimeline(outcomes: readonly Outcome[], paint: Palette, width: number): string[] {
  const label = String(outcomes.length).length + 1;
  const groups = Math.max(1, Math.floor((width - label - 2) / (GROUP + 1)));
  const perLine = groups * GROUP;
  const first429 = outcomes.findIndex((o) => o.status === 429);
  const rows = Math.ceil(outcomes.length / perLine);
  const shown = (r: number) =>
    rows <= MAX_LINES || r < HEAD || r >= rows - TAIL || Math.floor(first429 / perLine) === r;
  const lines: string[] = [];
  for (let r = 0; r < rows; r++) {
    const start = r * perLine;
    const row = outcomes.slice(start, start + perLine);
    if (!shown(r)) {
      let end = r;
      while (end + 1 < rows && !shown(end + 1)) end++;
      const skipped = outcomes.slice(start, (end + 1) * perLine);
      const counts = new Map<string, number>();
      for (const o of skipped) counts.set(visibleGlyph(o), (counts.get(visibleGlyph(o)) ?? 0) + 1);
      const summary = [...counts].map(([glyph, n]) => `${n} × ${glyph}`).join(', ');
      lines.push(
        paint.dim(
          `${'…'.padStart(label)}  requests #${start + 1}–#${start + skipped.length} not drawn: ${summary}`,
        ),
      );
      r = end;
      continue;
    }
    let text = `${String(start + 1).padStart(label)}  `;
    for (let i = 0; i < row.length; i++)
      text += `${i > 0 && i % GROUP === 0 ? ' ' : ''}${cell(row[i], paint)}`;
    lines.push(text);
    if (first429 >= start && first429 < start + perLine) {
      const offset = first429 - start;
      const column = label + 2 + offset + Math.floor(offset / GROUP);
      lines.push(`${' '.repeat(column)}${paint.yellow('^')} first 429: request #${first429 + 1}`);
    }
  }
  const seen = new Set(outcomes.map((o) => visibleGlyph(o)));
  lines.push(
    paint.dim(
      GLYPHS.filter(([glyph]) => seen.has(glyph))
        .map(([glyph, meaning]) => `${glyph} ${meaning}`)
        .join('   '),
    ),
  );
  return lines;
}

const PLAIN = palette(false);

function visibleGlyph(outcome: Outcome): string {
  return cell(outcome, PLAIN);
}

/** `10 9 8 … 1 0×90`: a sequence of values with runs of one value folded. */
export function foldRuns(values: readonly number[]): string {
  const parts: string[] = [];
  for (let i = 0; i < values.length; ) {
    let j = i + 1;
    while (j < values.length && values[j] === values[i]) j++;
    const run = j - i;
    parts.push(run > 2 ? `${values[i]}×${run}` : Array(run).fill(values[i]).join(' '));
    i = j;
  }
  return parts.join(' ');
}

/** The quotas by identity (dialect and policy), in the order first seen. */
function quotaSeries(outcomes: readonly Outcome[]) {
  const series = new Map<string, { quota: Quota; remaining: number[]; last: Quota }>();
  // Answers in the order they came back: the server's counter moves in that order, not in sending order.
  const answered = outcomes
    .filter((o) => o.status !== undefined)
    .sort((a, b) => a.sentMs + a.ms - (b.sentMs + b.ms));
  for (const outcome of answered) {
    for (const quota of outcome.reading.quotas) {
      const id = `${quota.dialect} ${quota.policy ?? ''}`;
      let entry = series.get(id);
      if (entry === undefined) {
        entry = { quota, remaining: [], last: quota };
        series.set(id, entry);
      }
      if (quota.remaining !== undefined) entry.remaining.push(quota.remaining);
      entry.last = quota;
    }
  }
  return [...series.values()];
}

const DIALECT_NAMES: Record<Quota['dialect'], string> = {
  'draft-10': 'RateLimit + RateLimit-Policy (IETF draft 8+)',
  'draft-7': 'RateLimit: limit=, remaining=, reset= (IETF draft 7)',
  'draft-6': 'RateLimit-Limit/-Remaining/-Reset (IETF draft 6)',
  'x-ratelimit': 'X-RateLimit-Limit/-Remaining/-Reset',
  openai: 'x-ratelimit-limit|remaining|reset-<unit> (OpenAI)',
  anthropic: 'anthropic-ratelimit-<unit>-limit|remaining|reset (Anthropic)',
};

const secondsText = (ms: number) => `${Number((ms / 1000).toFixed(3))} s`;

/** How each quota's `remaining` counted down, in the order the answers came back. */
export function renderCountdown(outcomes: readonly Outcome[], paint: Palette, width: number): string[] {
  const lines: string[] = [];
  for (const { quota, remaining, last } of quotaSeries(outcomes)) {
    const facts = [
      quota.policy === undefined ? undefined : `policy "${quota.policy}"`,
      last.limit === undefined ? undefined : `limit ${last.limit}`,
      last.windowMs === undefined ? undefined : `window ${secondsText(last.windowMs)}`,
      last.resetMs === undefined ? undefined : `last reset in ${secondsText(last.resetMs)}`,
    ].filter((fact) => fact !== undefined);
    lines.push(
      `${paint.bold(DIALECT_NAMES[quota.dialect])}${facts.length > 0 ? `: ${facts.join(', ')}` : ''}`,
    );
    if (remaining.length > 0)
      lines.push(...wrap(`remaining: ${foldRuns(remaining)}`, '  ', '    ', width).split('\n'));
  }
  const waits = outcomes.flatMap((o) =>
    o.reading.retryAfterMs === undefined ? [] : [o.reading.retryAfterMs],
  );
  if (waits.length > 0) {
    const low = Math.min(...waits);
    const high = Math.max(...waits);
    lines.push(
      `${paint.bold('Retry-After')} on ${waits.length} answer${waits.length === 1 ? '' : 's'}: ${
        low === high ? secondsText(low) : `${secondsText(low)} to ${secondsText(high)}`
      }`,
    );
  }
  if (lines.length === 0) lines.push(paint.dim('no rate-limit fields in any answer'));
  return lines;
}

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/** The whole report of a burst, as lines. */
export function renderReport(result: BurstResult, paint: Palette, width: number): string[] {
  const { options, outcomes } = result;
  const lines = [
    paint.bold(
      `${outcomes.length} × ${options.method} ${options.url}, ${options.concurrency} at a time, in ${Math.round(result.elapsedMs)} ms`,
    ),
  ];
  if (result.interrupted)
    lines.push(paint.yellow(`  interrupted: ${outcomes.length} of ${options.requests} sent`));
  const counts = new Map<string, { n: number; shown: string }>();
  for (const o of outcomes) {
    const key = o.status === undefined ? (o.error ?? 'failed') : String(o.status);
    const shown = o.status === undefined ? paint.red(key) : paint.status(o.status);
    counts.set(key, { n: (counts.get(key)?.n ?? 0) + 1, shown });
  }
  for (const { n, shown } of [...counts.values()].sort((a, b) => b.n - a.n)) {
    lines.push(`  ${String(n).padStart(6)} × ${shown}`);
  }
  const times = outcomes
    .filter((o) => o.status !== undefined)
    .map((o) => o.ms)
    .sort((a, b) => a - b);
  if (times.length > 0) {
    lines.push(
      paint.dim(
        `  latency of the answers: p50 ${percentile(times, 50).toFixed(1)} ms · p99 ${percentile(times, 99).toFixed(1)} ms · max ${times.at(-1)!.toFixed(1)} ms`,
      ),
    );
  } else lines.push(paint.red('  no request got an HTTP answer'));
  lines.push('', paint.bold('timeline'), ...renderTimeline(outcomes, paint, width - 2).map((l) => `  ${l}`));
  lines.push('', ...renderCountdown(outcomes, paint, width));
  return lines;
}
