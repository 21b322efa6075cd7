import { busiest, type Chart, type EventsChart, type GanttChart, type LevelChart } from './model.ts';

/**
 * The tour's charts as inline SVG, for `floodgate tour --html`: the same data as the terminal's text charts,
 * no scripts, no fonts or images from elsewhere. Colours come from the page's stylesheet (classes `ok`,
 * `refused`, `queued`, `axis`, `mark`).
 */
export function chartSvg(chart: Chart): string {
  if (chart.kind === 'events') return eventsSvg(chart);
  if (chart.kind === 'level') return levelSvg(chart);
  return ganttSvg(chart);
}

/** Text for XML: `&`, `<`, `>` and quotes escaped. */
export function xml(text: string | number): string {
  return String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

const n = (value: number) => Number(value.toFixed(1));
const seconds = (ms: number) => `${Number((ms / 1000).toFixed(2))} s`;

function svg(width: number, height: number, label: string, body: string[]): string {
  return `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" role="img" aria-label="${xml(label)}">\n${body.join('\n')}\n</svg>`;
}

const text = (x: number, y: number, content: string | number, attributes = '') =>
  `<text x="${n(x)}" y="${n(y)}"${attributes === '' ? '' : ` ${attributes}`}>${xml(content)}</text>`;

function eventsSvg(chart: EventsChart): string {
  const left = 130;
  const plot = 480;
  const right = 180;
  const lane = 48;
  const top = 30;
  const x = (ms: number) => left + ((ms - chart.fromMs) / (chart.toMs - chart.fromMs)) * plot;
  const height = top + chart.rows.length * 2 * lane + 40;
  const body: string[] = [];
  const axisY = height - 30;
  for (const mark of chart.marks) {
    body.push(
      `<line class="mark" x1="${n(x(mark.atMs))}" y1="${top - 10}" x2="${n(x(mark.atMs))}" y2="${axisY}"/>`,
    );
    body.push(text(x(mark.atMs) + 4, top - 14, mark.label, 'class="mark-label"'));
  }
  chart.rows.forEach((row, r) => {
    for (const ok of [true, false]) {
      const base = top + (r * 2 + (ok ? 1 : 2)) * lane - 6;
      body.push(`<line class="axis" x1="${left}" y1="${base}" x2="${left + plot}" y2="${base}"/>`);
      body.push(text(left - 8, base - 4, ok ? `${row.label} passed` : 'refused', 'text-anchor="end"'));
      // Events in the same 4-pixel column are stacked, one dot above the other.
      const stacks = new Map<number, number>();
      for (const event of row.events.filter((e) => e.ok === ok)) {
        const column = Math.round(x(event.atMs) / 4) * 4;
        const level = stacks.get(column) ?? 0;
        stacks.set(column, level + 1);
        body.push(
          `<circle class="${ok ? 'ok' : 'refused'}" cx="${column}" cy="${base - 4 - level * 4}" r="2"><title>${xml(`${row.label} ${ok ? 'passed' : 'refused'} at ${seconds(event.atMs)}`)}</title></circle>`,
        );
      }
      const summary = ok
        ? `busiest ${seconds(chart.windowMs)}: ${busiest(row.events, chart.windowMs)} passed`
        : `${row.events.filter((e) => !e.ok).length} refused`;
      body.push(text(left + plot + 12, base - 4, summary));
    }
  });
  body.push(`<line class="axis" x1="${left}" y1="${axisY}" x2="${left + plot}" y2="${axisY}"/>`);
  for (const ms of [chart.fromMs, ...chart.marks.map((m) => m.atMs), chart.toMs]) {
    body.push(text(x(ms), axisY + 16, seconds(ms), 'text-anchor="middle"'));
  }
  return svg(left + plot + right, height, chart.title, body);
}

function levelSvg(chart: LevelChart): string {
  const left = 50;
  const step = 14;
  const gap = 40;
  const top = 20;
  const plot = 150;
  const y = (level: number) => top + plot - (level / chart.max) * plot;
  const body: string[] = [];
  let x = left + 10;
  for (const segment of chart.segments) {
    const from = x;
    for (const [i, point] of segment.points.entries()) {
      const bar = point.level / chart.max;
      body.push(
        `<rect class="${point.ok ? 'ok' : 'refused'}" x="${x}" y="${n(y(point.level))}" width="${step - 4}" height="${n(bar * plot)}"><title>${xml(`${segment.label}, request ${i + 1}: ${point.ok ? 'passed' : 'refused'}, ${point.level} ${chart.unit} left`)}</title></rect>`,
      );
      if (!point.ok)
        body.push(
          text(x + (step - 4) / 2, top + plot + 16, '×', 'class="refused-mark" text-anchor="middle"'),
        );
      x += step;
    }
    body.push(text((from + x - 4) / 2, top + plot + 34, segment.label, 'text-anchor="middle"'));
    x += gap;
  }
  const width = x - gap + 20;
  body.push(`<line class="axis" x1="${left}" y1="${top + plot}" x2="${width - 10}" y2="${top + plot}"/>`);
  body.push(`<line class="axis" x1="${left}" y1="${top}" x2="${left}" y2="${top + plot}"/>`);
  body.push(text(left - 6, top + 4, chart.max, 'text-anchor="end"'));
  body.push(text(left - 6, top + plot + 4, 0, 'text-anchor="end"'));
  body.push(
    text(12, top + plot / 2, chart.unit, `transform="rotate(-90 12 ${top + plot / 2})" text-anchor="middle"`),
  );
  return svg(width, top + plot + 50, chart.title, body);
}

function ganttSvg(chart: GanttChart): string {
  const left = 50;
  const plot = 560;
  const row = 26;
  const top = 30;
  const x = (ms: number) => left + (Math.min(ms, chart.toMs) / chart.toMs) * plot;
  const body: string[] = [];
  const bottom = top + chart.rows.length * row;
  chart.rows.forEach((r, i) => {
    const y = top + i * row;
    body.push(text(left - 8, y + 17, r.label, 'text-anchor="end"'));
    const workFrom = r.startMs ?? r.endMs;
    body.push(
      `<rect class="queued" x="${left}" y="${y + 4}" width="${n(x(workFrom) - left)}" height="${row - 8}"><title>${xml(`${r.label} queued ${Math.round(workFrom)} ms`)}</title></rect>`,
    );
    if (r.startMs !== undefined) {
      body.push(
        `<rect class="${r.status < 400 ? 'ok' : 'refused'}" x="${n(x(r.startMs))}" y="${y + 4}" width="${n(Math.max(1, x(r.endMs) - x(r.startMs)))}" height="${row - 8}"><title>${xml(`${r.label} worked ${Math.round(r.endMs - r.startMs)} ms`)}</title></rect>`,
      );
    }
    body.push(
      text(
        x(Math.max(r.endMs, chart.deadlineMs)) + 8,
        y + 17,
        r.status,
        `class="${r.status < 400 ? 'ok-text' : 'refused-text'}"`,
      ),
    );
  });
  const deadline = x(chart.deadlineMs);
  body.push(
    `<line class="mark" x1="${n(deadline)}" y1="${top - 10}" x2="${n(deadline)}" y2="${bottom + 4}"/>`,
  );
  body.push(
    text(deadline, top - 14, `deadline ${chart.deadlineMs} ms`, 'class="mark-label" text-anchor="middle"'),
  );
  body.push(`<line class="axis" x1="${left}" y1="${bottom + 4}" x2="${left + plot}" y2="${bottom + 4}"/>`);
  for (let ms = 0; ms <= chart.toMs; ms += 100)
    body.push(text(x(ms), bottom + 20, `${ms} ms`, 'text-anchor="middle"'));
  return svg(left + plot + 60, bottom + 30, chart.title, body);
}
