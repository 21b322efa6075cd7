import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { rateLimiting } from '../../adapters/node/rate-limiting.ts';
import type { RateLimitingOptions, RouteLimit } from '../../http/rate-limiting/options.ts';
import type { Chart } from '../charts/model.ts';
import { renderChart } from '../charts/text.ts';
import { bold, cyan, dim, out, print, setProgress, status, stdoutWidth, visible, wrap } from '../ui.ts';

/**
 * What every chapter of the tour uses: a clock the tour can move forward (so time-based lessons need no
 * waiting), a local server on a free port, a client that sends real HTTP requests, and the narration.
 */

/** Monotonic time that the tour can jump ahead: `performance.now()` plus the jumps so far. */
export class TourClock {
  #offset = 0;
  now(): number {
    return performance.now() + this.#offset;
  }
  /** Moves time forward by `ms` without waiting. */
  jump(ms: number): void {
    this.#offset += ms;
  }
}

/** One answer as the tour reports it. */
export interface Answer {
  index: number;
  status: number;
  /** Milliseconds from sending to the end of the response. */
  ms: number;
  /** Milliseconds from the start of the batch to the end of this response. */
  at: number;
  /** When it was sent, in `performance.now()` time. */
  sentAt: number;
  headers: Record<string, string>;
  body: string;
}

export interface Send {
  path: string;
  count?: number;
  /** Send all at once (default) or one after another. */
  parallel?: boolean;
  /** Headers of request `i`. */
  headers?: (i: number) => Record<string, string>;
}

/** A handler that answers 200 after `?ms=` milliseconds (default at once). */
function handler(req: IncomingMessage, res: ServerResponse): void {
  const q = req.url?.indexOf('?') ?? -1;
  const ms = q < 0 ? 0 : Number(new URLSearchParams(req.url!.slice(q)).get('ms') ?? 0);
  const reply = () => {
    res.setHeader('content-type', 'text/plain');
    res.end('ok\n');
  };
  if (ms > 0) setTimeout(reply, ms);
  else reply();
}

export class Tour {
  readonly clock = new TourClock();
  requests = 0;
  /** What the progress line says about the chapter in progress. */
  chapter = '';
  /** The title of the chapter in progress, for the charts. */
  title = '';
  /** The charts drawn so far, with their chapter's title, for `--html`. */
  readonly charts: Array<{ chapter: string; chart: Chart }> = [];
  #servers: http.Server[] = [];
  readonly #agent = new http.Agent({ keepAlive: true, maxSockets: 256 });

  /** Starts a local server with floodgate's node adapter; `routes` maps a path to its setting. */
  async serve(
    options: RateLimitingOptions<IncomingMessage, ServerResponse>,
    routes: Record<string, RouteLimit<IncomingMessage, ServerResponse> | undefined>,
  ): Promise<string> {
    const limit = rateLimiting(options);
    const table = new Map(Object.entries(routes).map(([path, setting]) => [path, limit(handler, setting)]));
    const notFound = limit((_req: IncomingMessage, res: ServerResponse) => {
      res.statusCode = 404;
      res.end();
    });
    const server = http.createServer((req, res) => {
      const path = (req.url ?? '/').split('?', 1)[0];
      (table.get(path) ?? notFound)(req, res);
    });
    this.#servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  /** Sends real requests and collects the answers, in the order they were sent. */
  async send(base: string, spec: Send): Promise<Answer[]> {
    const count = spec.count ?? 1;
    const start = performance.now();
    const one = (i: number) =>
      new Promise<Answer>((resolve, reject) => {
        const sent = performance.now();
        const req = http.get(
          `${base}${spec.path}`,
          { agent: this.#agent, headers: spec.headers?.(i) },
          (res) => {
            let body = '';
            res.setEncoding('utf8');
            res.on('data', (chunk: string) => {
              body += chunk;
            });
            res.on('end', () => {
              const now = performance.now();
              const headers: Record<string, string> = {};
              for (const [name, value] of Object.entries(res.headers)) headers[name] = String(value);
              this.requests++;
              if (this.requests % 20 === 0) this.progress();
              resolve({
                index: i,
                status: res.statusCode ?? 0,
                ms: now - sent,
                at: now - start,
                sentAt: sent,
                headers,
                body,
              });
            });
          },
        );
        req.on('error', reject);
      });
    let answers: Answer[];
    if (spec.parallel === false) {
      answers = [];
      for (let i = 0; i < count; i++) answers.push(await one(i));
    } else answers = await Promise.all(Array.from({ length: count }, (_, i) => one(i)));
    this.progress();
    return answers;
  }

  /** Draws a chart of what was measured, and keeps it for the HTML report. */
  chart(chart: Chart): void {
    this.charts.push({ chapter: this.title, chart });
    print();
    print(bold(wrap(chart.title, INDENT)));
    for (const text of renderChart(chart, out, stdoutWidth() - INDENT.length)) print(INDENT + text);
    print();
  }

  /** Refreshes the progress line (on a TTY). */
  progress(): void {
    setProgress(`${this.chapter} · ${this.requests} requests sent`);
  }

  /** Closes this chapter's servers. */
  async close(): Promise<void> {
    for (const server of this.#servers.splice(0)) {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  }

  destroy(): void {
    this.#agent.destroy();
  }
}

// ---- narration -------------------------------------------------------------------------------------------

const INDENT = '      ';

/** A paragraph of explanation. */
export function say(text: string): void {
  print(wrap(text, INDENT));
}

/**
 * Prints `text` after `first` as it is when it fits the terminal (keeping its alignment), else wrapped at
 * spaces with `rest` before each following line.
 */
function fit(first: string, text: string, rest = INDENT): void {
  if (visible(first) + visible(text) <= stdoutWidth()) print(first + text);
  else print(wrap(text, first, rest));
}

/** What was sent. */
export function sent(text: string): void {
  fit(`${INDENT}${cyan('sent')}  `, text, `${INDENT}      `);
}

/** What came back: status counts, and time if it matters. */
export function got(answers: Answer[], label = 'got '): void {
  const counts = new Map<number, number>();
  for (const a of answers) counts.set(a.status, (counts.get(a.status) ?? 0) + 1);
  const summary = [...counts].map(([code, n]) => `${n} × ${status(code)}`).join(', ');
  fit(
    `${INDENT}${cyan(label)}  `,
    `${summary}  ${dim(`in ${Math.round(Math.max(...answers.map((a) => a.at)))} ms`)}`,
    `${INDENT}      `,
  );
}

/** Statuses in order, compactly: 200 200 429 … */
export function sequence(answers: Answer[]): string {
  return answers.map((a) => status(a.status)).join(' ');
}

/** Shows chosen header fields of one answer. */
export function fields(answer: Answer, names: string[], label = ''): void {
  if (label !== '') print(`${INDENT}${dim(label)}`);
  for (const name of names) {
    const value = answer.headers[name.toLowerCase()];
    fit(`${INDENT}  ${bold(name)}: `, value === undefined ? dim('(absent)') : value, `${INDENT}    `);
  }
}

/** The reason, after the facts. */
export function why(text: string): void {
  print(wrap(text, `${INDENT}${cyan('why')}   `, INDENT));
}

/** A plain line under the chapter. */
export function line(text: string): void {
  fit(INDENT, text);
}

/**
 * Runs `during` with floodgate's own warnings caught rather than printed by Node mid-chapter (others still go
 * where they went), so the chapter can show them as part of its lesson.
 */
export async function catchingWarnings<T>(
  during: () => Promise<T>,
): Promise<{ result: T; warnings: Array<Error & { code?: string }> }> {
  const others = process.listeners('warning');
  const warnings: Array<Error & { code?: string }> = [];
  const listener = (warning: Error & { code?: string }) => {
    if (warning.name === 'FloodgateWarning') warnings.push(warning);
    else for (const other of others) other(warning);
  };
  process.removeAllListeners('warning');
  process.on('warning', listener);
  try {
    const result = await during();
    // process.emitWarning delivers on the next tick.
    await new Promise((resolve) => setImmediate(resolve));
    return { result, warnings };
  } finally {
    process.off('warning', listener);
    for (const other of others) process.on('warning', other);
  }
}
