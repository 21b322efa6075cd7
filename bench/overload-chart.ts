/** Charts for `npm run bench:overload`: the limit and the p99 latency over time, in a terminal and as SVG. */
import type { TracePoint } from './overload-sim.ts';

const BLOCKS = ' ▁▂▃▄▅▆▇█';

/** Two rows of block characters (limit, p99), one column per 250 ms, with the step marked. */
export function terminalChart(title: string, trace: TracePoint[], stepAt: number): void {
  const buckets: TracePoint[] = [];
  for (let i = 0; i < trace.length; i += 2) buckets.push(trace[i]);
  const row = (values: number[]) => {
    const finite = values.filter(Number.isFinite);
    const max = Math.max(1, ...finite);
    return values
      .map((v) => (Number.isFinite(v) ? BLOCKS[Math.round((v / max) * (BLOCKS.length - 1))] : ' '))
      .join('');
  };
  const limits = buckets.map((p) => p.limit);
  const p99s = buckets.map((p) => p.p99);
  const step = buckets.findIndex((p) => p.t >= stepAt);
  console.log(title);
  console.log(`  limit ${row(limits)}  max ${Math.max(...limits)}`);
  console.log(`  p99   ${row(p99s)}  max ${Math.max(...p99s.filter(Number.isFinite)).toFixed(0)} ms`);
  console.log(`        ${' '.repeat(Math.max(0, step))}^ 3× slower · one column = 200 ms\n`);
}

const COLORS = ['#1f77b4', '#d62728', '#2ca02c'];

/** An SVG with two panels (limit; p99 latency / unloaded p99) for each traced gate. */
export function svgChart(
  series: { name: string; trace: TracePoint[] }[],
  stepAt: number,
  unloaded: number,
): string {
  const W = 760;
  const H = 200;
  const left = 50;
  const right = 150;
  const end = Math.max(...series.map((s) => s.trace.at(-1)?.t ?? 1));
  const x = (t: number) => left + ((W - left - right) * t) / end;
  const panel = (top: number, label: string, value: (p: TracePoint) => number) => {
    const max = Math.max(1, ...series.flatMap((s) => s.trace.map(value).filter(Number.isFinite)));
    const y = (v: number) => top + H - (H * Math.min(v, max)) / max;
    const lines = series
      .map((s, i) => {
        const points = s.trace
          .filter((p) => Number.isFinite(value(p)))
          .map((p) => `${x(p.t).toFixed(1)},${y(value(p)).toFixed(1)}`)
          .join(' ');
        return `<polyline fill="none" stroke="${COLORS[i % COLORS.length]}" stroke-width="1.5" points="${points}"/>`;
      })
      .join('\n');
    const ticks = [0, 0.5, 1]
      .map(
        (f) => `<text x="${left - 6}" y="${y(max * f) + 4}" text-anchor="end">${(max * f).toFixed(0)}</text>`,
      )
      .join('');
    return `<text x="${left}" y="${top - 6}" font-weight="bold">${label}</text>
<rect x="${left}" y="${top}" width="${W - left - right}" height="${H}" fill="none" stroke="#999"/>${ticks}
${lines}`;
  };
  const legend = series
    .map(
      (s, i) =>
        `<text x="${W - right + 10}" y="${40 + i * 18}" fill="${COLORS[i % COLORS.length]}">${s.name}</text>`,
    )
    .join('');
  const seconds = Array.from({ length: Math.floor(end / 5000) + 1 }, (_, i) => i * 5000)
    .map((t) => `<text x="${x(t)}" y="${2 * H + 96}" text-anchor="middle">${t / 1000} s</text>`)
    .join('');
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${2 * H + 110}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
${panel(30, 'concurrency limit', (p) => p.limit)}
${panel(H + 70, 'p99 latency ÷ unloaded p99 (per 100 ms)', (p) => p.p99 / unloaded)}
<line x1="${x(stepAt)}" y1="24" x2="${x(stepAt)}" y2="${2 * H + 70}" stroke="#555" stroke-dasharray="4 3"/>
<text x="${x(stepAt) + 4}" y="${2 * H + 82}">dependency 3× slower</text>
${legend}${seconds}
</svg>
`;
}
