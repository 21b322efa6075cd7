import http from 'node:http';
import https from 'node:https';
import { bold, dim, print, status } from './ui.ts';

/** Options of `floodgate burst`. */
export interface BurstOptions {
  url: string;
  requests: number;
  concurrency: number;
  headers: Record<string, string>;
}

/**
 * `floodgate burst <url> [-n 100] [-c 10] [-H 'name: value']`: fires requests at a URL and summarises the
 * statuses, latencies and the rate-limit fields seen.
 */
export async function runBurst(options: BurstOptions): Promise<void> {
  const url = new URL(options.url);
  const client = url.protocol === 'https:' ? https : http;
  const agent = new client.Agent({ keepAlive: true, maxSockets: options.concurrency });
  const statuses = new Map<number | string, number>();
  const fields = new Map<string, string>();
  const times: number[] = [];
  let next = 0;
  const started = performance.now();
  const one = () =>
    new Promise<void>((resolve) => {
      const sent = performance.now();
      const req = client.get(url, { agent, headers: options.headers }, (res) => {
        res.resume();
        res.on('end', () => {
          times.push(performance.now() - sent);
          statuses.set(res.statusCode ?? 0, (statuses.get(res.statusCode ?? 0) ?? 0) + 1);
          for (const name of [
            'ratelimit-policy',
            'ratelimit',
            'retry-after',
            'x-ratelimit-limit',
            'x-ratelimit-remaining',
          ]) {
            const value = res.headers[name];
            if (value !== undefined) fields.set(`${name} (last, after ${res.statusCode})`, String(value));
          }
          resolve();
        });
      });
      req.on('error', (error: Error) => {
        statuses.set(error.message, (statuses.get(error.message) ?? 0) + 1);
        resolve();
      });
    });
  const worker = async () => {
    while (next < options.requests) {
      next++;
      await one();
    }
  };
  await Promise.all(Array.from({ length: Math.min(options.concurrency, options.requests) }, worker));
  agent.destroy();
  const elapsed = performance.now() - started;
  times.sort((a, b) => a - b);
  const pct = (p: number) =>
    times[Math.min(times.length - 1, Math.floor((p / 100) * times.length))]?.toFixed(1);
  print(
    bold(
      `${options.requests} × GET ${url.href}, ${options.concurrency} at a time, in ${Math.round(elapsed)} ms`,
    ),
  );
  for (const [code, n] of statuses)
    print(`  ${String(n).padStart(6)} × ${typeof code === 'number' ? status(code) : code}`);
  if (times.length > 0)
    print(dim(`  latency p50 ${pct(50)} ms · p99 ${pct(99)} ms · max ${times.at(-1)!.toFixed(1)} ms`));
  for (const [name, value] of fields) print(`  ${bold(name)}: ${value}`);
}
