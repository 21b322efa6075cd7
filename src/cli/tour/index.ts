import { writeFile } from 'node:fs/promises';
import { renderPage } from '../charts/html.ts';
import { bold, clearProgress, dim, magenta, print, wrap } from '../ui.ts';
import { defaults } from './01-defaults.ts';
import { retryAfter } from './02-retry-after.ts';
import { boundary } from './03-boundary.ts';
import { bursts } from './04-token-bucket.ts';
import { concurrencyLimits } from './05-concurrency.ts';
import { policies } from './06-policies.ts';
import { randomKeys } from './07-random-keys.ts';
import { proxies } from './08-proxies.ts';
import { timeouts } from './09-timeouts.ts';
import { adaptiveLimits } from './10-adaptive.ts';
import type { Chapter } from './chapter.ts';
import { Tour } from './kit.ts';

/** The chapters, in teaching order. */
export const chapters: readonly Chapter[] = [
  defaults,
  retryAfter,
  boundary,
  bursts,
  concurrencyLimits,
  policies,
  randomKeys,
  proxies,
  timeouts,
  adaptiveLimits,
];

/**
 * `floodgate tour`: replays the classic rate-limiting experiments, then request timeouts, against local
 * servers (node:http, in-memory store, free ports) with real HTTP requests, and explains each result. `only`
 * picks chapters by number; `html` names a file to write the charts to, as a self-contained page.
 */
export async function runTour(only?: readonly number[], html?: string, version = ''): Promise<void> {
  const tour = new Tour();
  const started = performance.now();
  const selected = chapters
    .map((c, i) => [i + 1, c] as const)
    .filter(([n]) => only === undefined || only.includes(n));
  print(bold('floodgate tour'));
  print(
    dim(
      wrap(
        `Local servers on free ports, the in-memory store, real HTTP requests. ${selected.length} experiment${selected.length === 1 ? '' : 's'}, well under a minute.`,
        '',
      ),
    ),
  );
  try {
    for (const [n, chapter] of selected) {
      tour.chapter = `  [${'■'.repeat(n)}${'□'.repeat(chapters.length - n)}] ${n}/${chapters.length} ${chapter.title}`;
      tour.title = chapter.title;
      tour.progress();
      print();
      print(`${magenta(`${n}/${chapters.length}`)}  ${bold(chapter.title)}`);
      try {
        await chapter.run(tour);
      } finally {
        await tour.close();
      }
    }
  } finally {
    clearProgress();
    tour.destroy();
  }
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  print();
  if (html !== undefined) {
    const environment = `floodgate ${version}, Node ${process.version}, ${process.platform} ${process.arch}`;
    await writeFile(html, renderPage(tour.charts, { date: new Date(), environment }));
    print(
      dim(wrap(`${tour.charts.length} chart${tour.charts.length === 1 ? '' : 's'} written to ${html}.`, '')),
    );
  }
  print(
    dim(
      wrap(
        `${tour.requests} requests in ${seconds} s. Next: docs/rate-limiting.md, docs/timeouts.md, or \`floodgate burst <url>\`.`,
        '',
      ),
    ),
  );
}
