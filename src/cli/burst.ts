import http from 'node:http';
import https from 'node:https';
import type { BurstOptions } from './args.ts';
import { type Outcome, renderReport } from './burst-report.ts';
import { readRateLimit } from './dialects.ts';
import { colourFor, palette, terminalWidth } from './ui.ts';

/** Where `floodgate burst` writes: the report to `out`, live progress to `err` when it is a terminal. */
export interface BurstIo {
  out: { write(text: string): unknown; isTTY?: boolean; columns?: number };
  err: { write(text: string): unknown; isTTY?: boolean };
  env?: NodeJS.ProcessEnv;
  /** Stops the burst early (Ctrl-C): nothing more is sent, requests in flight are dropped, the report follows. */
  signal?: AbortSignal;
}

/**
 * `floodgate burst <url>`: sends the requests, `concurrency` at a time, each bounded by its timeout, then
 * writes the report. Resolves to the exit code: 0 when at least one request got an HTTP answer, else 1.
 */
export async function runBurst(
  asked: BurstOptions,
  io: BurstIo = { out: process.stdout, err: process.stderr },
): Promise<{ code: number; outcomes: Outcome[] }> {
  // No more in flight than there are requests to send: the sockets and the report say what really runs.
  const options = { ...asked, concurrency: Math.min(asked.concurrency, asked.requests) };
  const url = new URL(options.url);
  const client = url.protocol === 'https:' ? https : http;
  const agent = new client.Agent({ keepAlive: true, maxSockets: options.concurrency });
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of options.headers) {
    const key = name.toLowerCase();
    const before = headers[key];
    headers[key] = before === undefined ? value : [...[before].flat(), value];
  }
  const outcomes: Outcome[] = [];
  const live = io.err.isTTY === true;
  const colours = palette(colourFor(io.out, io.env));
  let next = 0;
  let lastProgress = 0;
  // One listener on the stop signal for the whole burst, not one per request (past ten in flight Node would warn
  // MaxListenersExceededWarning): it destroys whatever is in flight.
  const inFlight = new Set<http.ClientRequest>();
  const stop = () => {
    for (const req of inFlight) req.destroy(new Error('interrupted'));
  };
  io.signal?.addEventListener('abort', stop, { once: true });
  const started = performance.now();

  const progress = (force = false) => {
    const now = performance.now();
    if (!live || (!force && now - lastProgress < 100)) return;
    lastProgress = now;
    const counts = new Map<string, number>();
    for (const o of outcomes) {
      const key = String(o.status ?? o.error);
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
    const summary = [...counts].map(([key, n]) => `${key} ×${n}`).join('  ');
    io.err.write(
      `\r\x1b[2K${outcomes.length}/${options.requests} done  ${summary}  ${((now - started) / 1000).toFixed(1)} s`,
    );
  };

  const one = (index: number) =>
    new Promise<void>((resolve) => {
      const sent = performance.now();
      let finished = false;
      // The first of answer, error and timeout decides; what follows it (the error of a destroyed request) not.
      const done = (outcome: Partial<Outcome>) => {
        if (finished) return;
        finished = true;
        clearTimeout(timer);
        inFlight.delete(req);
        outcomes.push({
          index,
          sentMs: sent - started,
          ms: performance.now() - sent,
          reading: { quotas: [] },
          ...outcome,
        });
        progress();
        resolve();
      };
      const req = client.request(url, { method: options.method, agent, headers }, (res) => {
        res.resume();
        res.on('end', () =>
          done({ status: res.statusCode ?? 0, reading: readRateLimit(res.headers, Date.now()) }),
        );
        res.on('error', () => done({ status: res.statusCode ?? 0, error: 'aborted' }));
      });
      inFlight.add(req);
      const timer = setTimeout(() => {
        req.destroy();
        done({ error: 'timeout' });
      }, options.timeoutMs);
      req.on('error', (error: NodeJS.ErrnoException) =>
        done({ error: io.signal?.aborted ? 'interrupted' : (error.code ?? error.message) }),
      );
      req.end(options.body);
    });

  const worker = async () => {
    while (next < options.requests && io.signal?.aborted !== true) await one(next++);
  };
  try {
    await Promise.all(Array.from({ length: options.concurrency }, worker));
  } finally {
    io.signal?.removeEventListener('abort', stop);
    agent.destroy();
  }
  if (live) io.err.write('\r\x1b[2K');
  outcomes.sort((a, b) => a.index - b.index);
  const report = renderReport(
    { options, outcomes, elapsedMs: performance.now() - started, interrupted: io.signal?.aborted === true },
    colours,
    terminalWidth(io.out.isTTY === true ? io.out.columns : undefined),
  );
  io.out.write(`${report.join('\n')}\n`);
  return { code: outcomes.some((o) => o.status !== undefined) ? 0 : 1, outcomes };
}
