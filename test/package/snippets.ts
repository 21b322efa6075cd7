/**
 * The TypeScript snippets of README.md and docs/*.md, as the snippet test compiles them.
 *
 * - A ```ts block is checked: compiled, as its own module, against the packed package.
 * - What a snippet uses without defining (an `app`, a handler, a connected Redis client) it takes from a
 *   `<!-- given: … -->` HTML comment right above the block: real TypeScript declarations, prepended when
 *   compiling, invisible to readers. A snippet with a given block is only compiled; one without is also run.
 * - ```ts no-check: <reason> is left out, and only with a reason.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface Snippet {
  /** `docs/timeouts.md:40`: the file and the line of the opening fence. */
  readonly where: string;
  /** The declarations of its given block, or '' when it has none. */
  readonly given: string;
  readonly code: string;
  /** Why it is not checked (```ts no-check: reason), or undefined when it is. */
  readonly skipped: string | undefined;
}

/** The markdown files whose snippets are checked, relative to the repository. */
export function pages(repo: string): string[] {
  const docs = readdirSync(join(repo, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .sort();
  return ['README.md', ...docs.map((name) => `docs/${name}`)];
}

const fence = /^```(\S*)(.*)$/;

/** The declarations of a `<!-- given: … -->` comment that ends right where `text` does (blank lines aside). */
function givenBefore(text: string): string {
  const start = text.lastIndexOf('<!-- given:');
  if (start < 0) return '';
  const end = text.indexOf('-->', start);
  if (end < 0 || text.slice(end + 3).trim() !== '') return '';
  return text.slice(start + '<!-- given:'.length, end).trim();
}

/** Every ```ts / ```typescript block of `text`. */
export function snippets(page: string, text: string): Snippet[] {
  const lines = text.split('\n');
  const found: Snippet[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = fence.exec(lines[i]);
    if (!open) continue;
    let end = i + 1;
    while (end < lines.length && !lines[end].startsWith('```')) end++;
    if (open[1] === 'ts' || open[1] === 'typescript') {
      const before = lines.slice(0, i).join('\n');
      const rest = open[2].trim();
      found.push({
        where: `${page}:${i + 1}`,
        given: givenBefore(before),
        code: lines.slice(i + 1, end).join('\n'),
        skipped: rest.startsWith('no-check')
          ? rest.slice('no-check'.length).replace(/^:/, '').trim()
          : undefined,
      });
    }
    i = end;
  }
  return found;
}

/** Every snippet of every page. */
export function allSnippets(repo: string): Snippet[] {
  return pages(repo).flatMap((page) => snippets(page, readFileSync(join(repo, page), 'utf8')));
}
