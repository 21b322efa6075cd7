/**
 * What the shipped docs say of themselves: checks over their text that hold for every page (issue #23's
 * first-day traps). Pages are README.md and docs/*.md, as they ship in the package.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { repo } from './packed.ts';
import { pages } from './snippets.ts';

const text = (page: string) => readFileSync(join(repo, page), 'utf8');

/** A page's sections: from each heading to the next one, fenced code included. */
function sections(page: string): { heading: string; body: string }[] {
  const out: { heading: string; body: string }[] = [];
  let fenced = false;
  let current = { heading: '(top)', body: '' };
  for (const line of text(page).split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    if (!fenced && /^#{1,6} /.test(line)) {
      out.push(current);
      current = { heading: line, body: '' };
    }
    current.body += `${line}\n`;
  }
  out.push(current);
  return out;
}

test('an `npm run` script is named only where the section says it is in the repository (benchmarks.md aside)', () => {
  // The package ships no scripts: a user with it in node_modules cannot `npm run bench:redis`.
  const bad: string[] = [];
  for (const page of pages(repo)) {
    if (page === 'docs/benchmarks.md') continue;
    for (const { heading, body } of sections(page)) {
      if (body.includes('npm run') && !/in the repository/i.test(body)) bad.push(`${page}: ${heading}`);
    }
  }
  assert.deepEqual(bad, []);
});

test("migration tables give floodgate's Fastify route key, config.rateLimiting, not config.rateLimit", () => {
  // `config: { rateLimit: … }` is @fastify/rate-limit's form; floodgate reads config.rateLimiting.
  for (const page of pages(repo)) assert.doesNotMatch(text(page), /config: \{ rateLimit[:}]/, page);
});

test('docs/redis.md: setup, failure modes and Cluster come before how it decides and the benchmarks', () => {
  const headings = sections('docs/redis.md').map((s) => s.heading);
  const at = (name: string) => headings.findIndex((h) => h.includes(name));
  for (const first of ['Three instances', 'Failure modes', 'Redis Cluster']) {
    for (const later of ['How it decides', 'Performance'])
      assert.ok(at(first) < at(later), `${first} before ${later}`);
  }
});

test('a measured figure (time, instructions, throughput) has its command and date in its section', () => {
  // The house rule: a figure in the docs comes from a run of the code, with command, date and machine. A figure
  // is a number with a unit only a measurement gives (µs, ns, instructions, decisions or requests per second);
  // its section (heading to heading) must name the bench that printed it and the day it ran. Options and
  // defaults (`100 ms`, `2 × permitLimit`) are not figures and are not matched.
  const figure = /\d(?:[\d ,.]*\d)?\s?(?:µs|ns\b|k? ?instructions\b|decisions\/s|requests\/s|req\/s)/;
  const command = /npm run (?:-s )?bench|node (?:--\S+ )*--import tsx bench\//;
  const date = /\b\d{1,2} (?:November|December) 20\d\d\b|\b20\d\d-\d\d-\d\d\b/;
  const bad: string[] = [];
  for (const page of pages(repo)) {
    for (const { heading, body } of sections(page)) {
      const found = figure.exec(body.replace(/```[\s\S]*?```/g, ''));
      if (found === null) continue;
      if (!command.test(body))
        bad.push(`${page}: ${heading}: "${found[0]}" without the command that measured it`);
      if (!date.test(body)) bad.push(`${page}: ${heading}: "${found[0]}" without the date it was measured`);
    }
  }
  assert.deepEqual(bad, []);
});
