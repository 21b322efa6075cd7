/**
 * The tour's charts as data: what was measured, on a time axis. The terminal draws them as text
 * (`text.ts`), `--html` as SVG (`svg.ts`); both read only these shapes.
 */

/** Requests on a time axis, admitted or refused, one row per route (chapter 3). */
export interface EventsChart {
  kind: 'events';
  title: string;
  /** The axis, in milliseconds of the tour's clock. */
  fromMs: number;
  toMs: number;
  /** Vertical lines: a window boundary. */
  marks: Array<{ atMs: number; label: string }>;
  rows: Array<{ label: string; events: Array<{ atMs: number; ok: boolean }> }>;
  /** The length of the window whose busiest stretch the chart counts ("20 passed in one 1 s window"). */
  windowMs: number;
}

/** A level after each request, in bursts at a few moments (chapter 4: the bucket's tokens). */
export interface LevelChart {
  kind: 'level';
  title: string;
  /** The level's ceiling (the bucket's size). */
  max: number;
  /** What the level counts: `tokens`. */
  unit: string;
  /** Bursts in time order; each point is one request, its outcome and the level it left. */
  segments: Array<{ label: string; points: Array<{ level: number; ok: boolean }> }>;
}

/** Each request's wait and its work against a deadline (chapter 9). */
export interface GanttChart {
  kind: 'gantt';
  title: string;
  deadlineMs: number;
  /** The end of the axis. */
  toMs: number;
  /** Milliseconds from the moment the requests were sent. `startMs` absent: the work never began. */
  rows: Array<{ label: string; startMs?: number; endMs: number; status: number }>;
}

export type Chart = EventsChart | LevelChart | GanttChart;

/** The most admitted events in any stretch of `windowMs` (the rate a client really got). */
export function busiest(events: ReadonlyArray<{ atMs: number; ok: boolean }>, windowMs: number): number {
  const times = events
    .filter((e) => e.ok)
    .map((e) => e.atMs)
    .sort((a, b) => a - b);
  let best = 0;
  for (let i = 0, j = 0; j < times.length; j++) {
    while (times[j] - times[i] >= windowMs) i++;
    best = Math.max(best, j - i + 1);
  }
  return best;
}
