import { type Palette, wrap } from '../ui.ts';
import { busiest, type Chart, type EventsChart, type GanttChart, type LevelChart } from './model.ts';

/**
 * The tour's charts as text for a terminal, `width` columns at most. Every mark has its own glyph, so a chart
 * reads the same without colour (NO_COLOR, a log file); colour only adds to it.
 */
export function renderChart(chart: Chart, paint: Palette, width: number): string[] {
  if (chart.kind === 'events') return renderEvents(chart, paint, width);
  if (chart.kind === 'level') return renderLevel(chart, paint, width);
  return renderGantt(chart, paint, width);
}

/** A legend under a chart: dim, wrapped to `width` at spaces, every line indented by `indent`. */
function legend(text: string, indent: number, paint: Palette, width: number): string[] {
  const pad = ' '.repeat(indent);
  return wrap(text, pad, pad, width)
    .split('\n')
    .map((line) => paint.dim(line));
}

const BARS = '▂▃▄▅▆▇█';
const seconds = (ms: number) => `${Number((ms / 1000).toFixed(2))} s`;

/** Writes `label` into `line` (an array of one-column cells) at `column`, if it fits and overlaps nothing. */
function place(line: string[], column: number, label: string): void {
  const start = Math.max(0, Math.min(column, line.length - label.length));
  for (let i = Math.max(0, start - 1); i < Math.min(line.length, start + label.length + 1); i++) {
    if (line[i] !== ' ') return;
  }
  for (let i = 0; i < label.length; i++) line[start + i] = label[i];
}

function renderEvents(chart: EventsChart, paint: Palette, width: number): string[] {
  const labels = chart.rows.map((r) => r.label);
  const labelWidth = Math.max(...labels.map((l) => l.length)) + 1;
  const summaries = chart.rows.map((row) => {
    const passed = busiest(row.events, chart.windowMs);
    return `busiest ${seconds(chart.windowMs)}: ${passed} passed`;
  });
  const summaryWidth = Math.max(...summaries.map((s) => s.length)) + 2;
  const lead = labelWidth + 9; // "passed  " / "refused "
  const columns = Math.max(20, Math.min(60, width - lead - summaryWidth));
  const span = chart.toMs - chart.fromMs;
  const column = (ms: number) =>
    Math.min(columns - 1, Math.max(0, Math.floor(((ms - chart.fromMs) / span) * columns)));
  const markColumns = new Set(chart.marks.map((m) => column(m.atMs)));

  const axis = Array<string>(columns + 12).fill(' ');
  place(axis, 0, seconds(chart.fromMs));
  for (const mark of chart.marks) place(axis, column(mark.atMs), seconds(mark.atMs));
  place(axis, columns - seconds(chart.toMs).length, seconds(chart.toMs));
  const lines = [`${' '.repeat(lead)}${paint.dim(axis.join('').trimEnd())}`];

  chart.rows.forEach((row, r) => {
    for (const ok of [true, false]) {
      const counts = Array<number>(columns).fill(0);
      for (const event of row.events) if (event.ok === ok) counts[column(event.atMs)]++;
      const most = Math.max(1, ...counts);
      let cells = '';
      for (let c = 0; c < columns; c++) {
        if (counts[c] > 0) {
          const bar = BARS[Math.ceil((counts[c] / most) * BARS.length) - 1];
          cells += ok ? paint.green(bar) : paint.red(bar);
        } else cells += markColumns.has(c) ? paint.cyan('│') : paint.dim('·');
      }
      const total = counts.reduce((a, b) => a + b, 0);
      const name = ok ? row.label.padEnd(labelWidth) : ' '.repeat(labelWidth);
      const summary = ok ? summaries[r] : `${total} refused`;
      lines.push(`${name}${ok ? 'passed  ' : 'refused '} ${cells}  ${summary}`);
    }
  });
  lines.push(
    ...legend(
      `${BARS.at(-1)} requests (taller: more in that instant)   │ ${chart.marks.map((m) => m.label).join(', ')}`,
      lead,
      paint,
      width,
    ),
  );
  return lines;
}

function renderLevel(chart: LevelChart, paint: Palette, width: number): string[] {
  const height = Math.min(chart.max, 5);
  const perRow = chart.max / height;
  const gutter = String(chart.max).length + 1;
  // Each burst is as wide as its requests, or its label when that is wider.
  const widths = chart.segments.map((s) => Math.max(s.points.length, s.label.length + 1));
  const each = (cell: (segment: LevelChart['segments'][number], s: number) => string, gap: string) =>
    chart.segments.map((segment, s) => cell(segment, s)).join(gap);
  const rows: string[] = [];
  for (let r = height; r >= 1; r--) {
    const top = r * perRow;
    const half = top - perRow / 2;
    const line = each((segment, s) => {
      const bars = segment.points.map((p) => (p.level >= top ? '█' : p.level >= half ? '▄' : ' '));
      return bars.map((b) => (b === ' ' ? b : paint.green(b))).join('') + ' '.repeat(widths[s] - bars.length);
    }, '   ');
    const label = r === height ? String(chart.max) : '';
    rows.push(`${label.padStart(gutter)} ${r === height ? '┤' : '│'}${line}`.trimEnd());
  }
  rows.push(`${'0'.padStart(gutter)} ┼${each((_, s) => '─'.repeat(widths[s]), '─┴─')}`);
  const outcomes = each(
    (segment, s) =>
      segment.points.map((p) => (p.ok ? paint.green('+') : paint.red('x'))).join('') +
      ' '.repeat(widths[s] - segment.points.length),
    '   ',
  );
  rows.push(`${' '.repeat(gutter)}  ${outcomes}`.trimEnd());
  rows.push(
    `${' '.repeat(gutter)}  ${paint.dim(each((segment, s) => segment.label.padEnd(widths[s]), '   ').trimEnd())}`,
  );
  rows.push(
    ...legend(
      `one column per request: █ ${chart.unit} left after it (▄ half a row), + passed, x refused`,
      gutter + 2,
      paint,
      width,
    ),
  );
  return rows;
}

function renderGantt(chart: GanttChart, paint: Palette, width: number): string[] {
  const labelWidth = Math.max(...chart.rows.map((r) => r.label.length)) + 2;
  const columns = Math.max(20, Math.min(60, width - labelWidth - 2));
  const column = (ms: number) => Math.min(columns, Math.max(0, Math.round((ms / chart.toMs) * columns)));
  const deadline = column(chart.deadlineMs);
  const axis = Array<string>(columns + 16).fill(' ');
  place(axis, deadline, `${chart.deadlineMs} ms deadline`);
  place(axis, 0, '0 ms');
  for (let ms = 100; ms < chart.toMs; ms += 100) place(axis, column(ms), String(ms));
  const lines = [`${' '.repeat(labelWidth)}${paint.dim(axis.join('').trimEnd())}`];
  for (const row of chart.rows) {
    const work = row.startMs === undefined ? undefined : column(row.startMs);
    const end = column(row.endMs);
    let cells = '';
    for (let c = 0; c < Math.max(end, deadline + 1); c++) {
      if (c === deadline) cells += paint.cyan('│');
      else if (c >= end) cells += ' ';
      else if (work === undefined || c < work) cells += paint.dim('░');
      else cells += row.status < 400 ? paint.green('█') : paint.red('█');
    }
    lines.push(`${row.label.padEnd(labelWidth)}${cells}  ${paint.status(row.status)}`);
  }
  lines.push(...legend('░ queued   █ working   │ the deadline, queue included', labelWidth, paint, width));
  return lines;
}
