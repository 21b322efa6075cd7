import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { renderPage } from '../../src/cli/charts/html.ts';
import { busiest, type EventsChart, type GanttChart, type LevelChart } from '../../src/cli/charts/model.ts';
import { renderChart } from '../../src/cli/charts/text.ts';
import { colourFor, palette, terminalWidth, visible, wrap } from '../../src/cli/ui.ts';

const plain = palette(false);

const events: EventsChart = {
  kind: 'events',
  title: 'boundary',
  fromMs: 900,
  toMs: 1_100,
  marks: [{ atMs: 1_000, label: 'restart' }],
  windowMs: 1_000,
  rows: [
    {
      label: '/fixed',
      events: [
        ...Array.from({ length: 10 }, () => ({ atMs: 950, ok: true })),
        ...Array.from({ length: 10 }, () => ({ atMs: 1_050, ok: true })),
      ],
    },
    {
      label: '/sliding',
      events: [
        ...Array.from({ length: 10 }, () => ({ atMs: 950, ok: true })),
        ...Array.from({ length: 10 }, () => ({ atMs: 1_050, ok: false })),
      ],
    },
  ],
};

describe('tour charts as text', () => {
  test('busiest(): the most admitted events within any stretch of the window', () => {
    assert.equal(busiest(events.rows[0].events, 1_000), 20);
    assert.equal(busiest(events.rows[1].events, 1_000), 10);
    assert.equal(
      busiest(
        [
          { atMs: 0, ok: true },
          { atMs: 1_000, ok: true },
        ],
        1_000,
      ),
      1,
    );
  });

  test('requests on a time axis: a column per instant, the boundary marked, passed and refused apart', () => {
    const lines = renderChart(events, plain, 80);
    assert.deepEqual(lines.slice(1, 5), [
      '/fixed   passed   ·········█·········│········█·········  busiest 1 s: 20 passed',
      '         refused  ···················│··················  0 refused',
      '/sliding passed   ·········█·········│··················  busiest 1 s: 10 passed',
      '         refused  ···················│········█·········  10 refused',
    ]);
    assert.equal(lines[0], `${' '.repeat(18)}0.9 s${' '.repeat(14)}1 s${' '.repeat(11)}1.1 s`);
  });

  test("the bucket's level: one column per request, the bursts side by side, + passed, x refused", () => {
    const chart: LevelChart = {
      kind: 'level',
      title: 'bucket',
      max: 4,
      unit: 'tokens',
      segments: [
        {
          label: 'at 0',
          points: [
            { level: 3, ok: true },
            { level: 2, ok: true },
            { level: 1, ok: true },
            { level: 0, ok: true },
            { level: 0, ok: false },
          ],
        },
        { label: 'at 1 s', points: [{ level: 0, ok: true }] },
      ],
    };
    assert.deepEqual(renderChart(chart, plain, 80).slice(0, 7), [
      ' 4 ┤',
      '   │█',
      '   │██',
      '   │███',
      ' 0 ┼──────┴────────',
      '    ++++x   +',
      '    at 0    at 1 s',
    ]);
  });

  test('wait and work against the deadline', () => {
    const chart: GanttChart = {
      kind: 'gantt',
      title: 'queue',
      deadlineMs: 300,
      toMs: 400,
      rows: [
        { label: '#1', startMs: 0, endMs: 100, status: 200 },
        { label: '#2', startMs: 200, endMs: 300, status: 504 },
        { label: '#3', endMs: 300, status: 504 },
      ],
    };
    const lines = renderChart(chart, plain, 24);
    assert.deepEqual(lines.slice(1, 4), [
      '#1  █████          │  200',
      '#2  ░░░░░░░░░░█████│  504',
      '#3  ░░░░░░░░░░░░░░░│  504',
    ]);
  });
});

describe('wrap()', () => {
  test('breaks at spaces only, never inside a word, within the width', () => {
    const text = 'The fixed window restarts at t = 1 s and forgets the first 10: twice the rate.';
    const lines = wrap(text, '  why ', '      ', 30).split('\n');
    for (const line of lines) assert.ok(visible(line) <= 30, line);
    assert.equal(lines.map((l) => l.trim().replace(/^why /, '')).join(' '), text);
  });

  test('a word wider than the line gets a line of its own; colour takes no width', () => {
    const colour = palette(true);
    assert.equal(wrap(`a ${'x'.repeat(12)} b`, '', '', 8), `a\n${'x'.repeat(12)}\nb`);
    assert.equal(wrap(`${colour.red('abc')} def`, '', '', 7), `${colour.red('abc')} def`);
  });
});

describe('renderPage()', () => {
  test('one figure per chart under its chapter; text escaped; nothing loaded from elsewhere', () => {
    const html = renderPage([{ chapter: 'A <b>', chart: events }], {
      date: new Date(0),
      environment: 'test',
    });
    assert.match(html, /<h2>A &#60;b&#62;<\/h2>/);
    assert.equal(html.match(/<svg /g)?.length, 1);
    assert.equal(html.match(/<circle /g)?.length, 40);
    assert.doesNotMatch(html, /<script|<link|src=/);
  });
});

describe('colourFor() and terminalWidth()', () => {
  test('colour on a terminal only, never with NO_COLOR (even empty) or TERM=dumb', () => {
    assert.equal(colourFor({ isTTY: true }, {}), true);
    assert.equal(colourFor({ isTTY: false }, {}), false);
    assert.equal(colourFor({}, {}), false);
    assert.equal(colourFor({ isTTY: true }, { NO_COLOR: '' }), false);
    assert.equal(colourFor({ isTTY: true }, { TERM: 'dumb' }), false);
  });

  test("the terminal's width, at most 100; 100 when it does not say", () => {
    assert.equal(terminalWidth(72), 72);
    assert.equal(terminalWidth(240), 100);
    assert.equal(terminalWidth(0), 100);
    assert.equal(terminalWidth(undefined), 100);
  });
});
