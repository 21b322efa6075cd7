import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  foldRuns,
  type Outcome,
  renderCountdown,
  renderReport,
  renderTimeline,
} from '../../src/cli/burst-report.ts';
import { palette } from '../../src/cli/ui.ts';

const plain = palette(false);
const colour = palette(true);

/** Outcomes from a compact spec: a status per request, `T` a timeout, `!` a refused connection. */
function outcomes(spec: Array<number | 'T' | '!'>, remaining?: (i: number) => number): Outcome[] {
  return spec.map((s, index) => ({
    index,
    sentMs: index,
    ms: 1,
    ...(typeof s === 'number' ? { status: s } : { error: s === 'T' ? 'timeout' : 'ECONNREFUSED' }),
    reading: {
      quotas:
        remaining === undefined || typeof s !== 'number'
          ? []
          : [
              {
                dialect: 'draft-10' as const,
                policy: 'api',
                limit: 5,
                remaining: remaining(index),
                resetMs: 9_000,
              },
            ],
    },
  }));
}

describe('renderTimeline()', () => {
  test('one cell per request in sending order, ten to a group, a caret under the first 429', () => {
    const spec = [...Array(12).fill(200), 429, 429, 503, 404, 301, 'T', '!', 200] as Array<
      number | 'T' | '!'
    >;
    assert.deepEqual(renderTimeline(outcomes(spec), plain, 80), [
      '  1  .......... ..xx54-T!.',
      '                  ^ first 429: request #13',
      '. 2xx   - 3xx   x 429   4 other 4xx   5 5xx   T timed out   ! no answer (connection failed)',
    ]);
  });

  test('lines hold as many groups of ten as the width allows, each labelled with its first request', () => {
    const lines = renderTimeline(outcomes(Array(45).fill(200)), plain, 30);
    assert.deepEqual(lines.slice(0, -1), [
      '  1  .......... ..........',
      ' 21  .......... ..........',
      ' 41  .....',
    ]);
  });

  test('the first 429 on a later line is marked on that line', () => {
    const lines = renderTimeline(outcomes([...Array(25).fill(200), 429]), plain, 30);
    assert.deepEqual(lines.slice(0, 3), [
      '  1  .......... ..........',
      ' 21  .....x',
      '          ^ first 429: request #26',
    ]);
  });

  test('a long burst: the first and last lines drawn, the middle summed up, the first 429 always shown', () => {
    // 10 000 requests at 80 columns: 60 to a line, 167 lines.
    const spec = Array.from({ length: 10_000 }, (_, i) => (i === 5_000 ? 429 : 200));
    const lines = renderTimeline(outcomes(spec), plain, 80);
    const drawn = lines.filter((l) => /^ *\d+ {2}[.x]/.test(l));
    assert.equal(drawn.length, 24 + 1 + 8);
    assert.equal(drawn[0].trim().split(/\s+/)[0], '1');
    assert.equal(drawn[24].trim().split(/\s+/)[0], '4981');
    assert.ok(lines.includes(`${' '.repeat(30)}^ first 429: request #5001`));
    assert.deepEqual(
      lines.filter((l) => l.includes('not drawn')),
      [
        '     …  requests #1441–#4980 not drawn: 3540 × .',
        '     …  requests #5041–#9540 not drawn: 4500 × .',
      ],
    );
    assert.equal(drawn.at(-1)!.trim().split(/\s+/)[0], '9961');
  });

  test('no 429, no caret', () => {
    const lines = renderTimeline(outcomes([200, 500]), plain, 80);
    assert.deepEqual(lines, [' 1  .5', '. 2xx   5 5xx']);
  });

  test('colour paints the cells, never changes their glyphs or columns', () => {
    const [line] = renderTimeline(outcomes([200, 429]), colour, 80);
    assert.equal(line, ' 1  \x1b[32m.\x1b[39m\x1b[33mx\x1b[39m');
  });
});

describe('renderCountdown()', () => {
  test('folds runs of one value', () => {
    assert.equal(foldRuns([4, 3, 2, 1, 0, 0, 0, 0]), '4 3 2 1 0×4');
    assert.equal(foldRuns([1, 1, 0]), '1 1 0');
    assert.equal(foldRuns([]), '');
  });

  test("how each policy's remaining counted down, in the order the answers came back", () => {
    const spec = [200, 200, 200, 200, 200, 429, 429, 429] as number[];
    const lines = renderCountdown(
      outcomes(spec, (i) => Math.max(0, 4 - i)),
      plain,
      80,
    );
    assert.deepEqual(lines, [
      'RateLimit + RateLimit-Policy (IETF draft 8+): policy "api", limit 5, last reset in 9 s',
      '  remaining: 4 3 2 1 0×4',
    ]);
  });

  test('a long countdown wraps at spaces within the width', () => {
    const spec = Array(40).fill(200) as number[];
    const lines = renderCountdown(
      outcomes(spec, (i) => 100 - i),
      plain,
      40,
    ).slice(1);
    assert.ok(lines.length > 1);
    for (const line of lines) assert.ok(line.length <= 40, line);
    assert.equal(lines.join(' ').replace(/\s+/g, ' ').trim().split(' ').length, 41);
  });

  test('says so when no answer had rate-limit fields', () => {
    assert.deepEqual(renderCountdown(outcomes([200]), plain, 80), ['no rate-limit fields in any answer']);
  });
});

describe('renderReport()', () => {
  test('statuses by count, then the timeline and the countdown', () => {
    const options = {
      url: 'http://127.0.0.1:1/',
      requests: 3,
      concurrency: 1,
      method: 'GET',
      headers: [],
      timeoutMs: 1000,
    };
    const lines = renderReport({ options, outcomes: outcomes(['!', '!', 200]), elapsedMs: 12.3 }, plain, 80);
    assert.equal(lines[0], '3 × GET http://127.0.0.1:1/, 1 at a time, in 12 ms');
    assert.deepEqual(lines.slice(1, 3), ['       2 × ECONNREFUSED', '       1 × 200']);
    assert.ok(lines.includes('timeline'));
    assert.ok(lines.includes('   1  !!.'));
  });
});
