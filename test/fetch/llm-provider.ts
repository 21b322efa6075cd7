/**
 * An imitation LLM provider over a real socket, as the providers document themselves:
 * - limits on requests and tokens per window, each a bucket refilled continuously (Anthropic: "your capacity is
 *   continuously replenished up to your maximum limit"; OpenAI's resets of a few milliseconds after one call say
 *   the same), starting full unless told;
 * - a call is charged when it arrives: one request, and its input plus its `max_tokens` (OpenAI: "the maximum of
 *   max_tokens and the estimated number of tokens"; Anthropic estimates output from max_tokens at the start)
 *   and, once its answer has ended, the output it did not use is given back (Anthropic adjusts to the real
 *   output at the end; `refund: false` keeps the charge);
 * - every answer carries the fields of its vendor: OpenAI's `x-ratelimit-limit|remaining|reset-requests|tokens`,
 *   the reset a duration until the bucket is full again (`1m0.5s`, `20ms`), and Anthropic's
 *   `anthropic-ratelimit-requests|tokens-limit|remaining|reset`, the reset an RFC 3339 time in whole seconds
 *   (rounded up), beside a `Date` in whole seconds;
 * - past a limit, a `429` with `retry-after-ms` and `Retry-After`: the time until the call would fit;
 * - answers with their `usage`, as JSON or as a server-sent-events stream whose usage comes in its last events.
 *   A stream can be held after its first event until the test says `release()` (`hold`), to show the client
 *   reads it as it arrives.
 * Paths: `/openai/json/<in>/<out>`, `/openai/sse/<in>/<out>`, `/anthropic/json/…`, `/anthropic/sse/…`, `/none`;
 * `?max_tokens=<n>` (default `<out>`).
 */
import type * as http from 'node:http';
import { startServer, type TestServer } from './server.ts';

export interface Provider extends TestServer {
  /** Lets held streams send their remaining events. */
  release(): void;
  /** Its limits from now on, fresh buckets (default: none). */
  limit(limits: Limits | undefined): void;
  /** What it admitted since `limit()`: calls answered 2xx and their real tokens (input + output). */
  readonly admitted: { calls: number; tokens: number; refused: number };
}

/** Requests and tokens per window, each a bucket of that size refilled continuously over the window. */
export interface Limits {
  requests: number;
  tokens: number;
  windowMs: number;
  /** The buckets start empty (as after a burst), not full. */
  empty?: boolean;
  /** Give back the output a call did not use, once its answer ended. Default true. */
  refund?: boolean;
}

export interface ProviderOptions {
  /** Streams wait for `release()` after their first event. Default true. */
  hold?: boolean;
  /** Milliseconds between a stream's events, and before a JSON answer. Default 0. */
  latencyMs?: number;
}

/** A bucket refilled continuously: `level` at `at` (ms), `size` per `windowMs`. */
class Bucket {
  level: number;
  at = Date.now();
  constructor(
    readonly size: number,
    readonly windowMs: number,
    empty: boolean,
  ) {
    this.level = empty ? 0 : size;
  }
  now(t: number): number {
    this.level = Math.min(this.size, this.level + ((t - this.at) * this.size) / this.windowMs);
    this.at = t;
    return this.level;
  }
  /** Milliseconds until `n` fit. */
  waitFor(n: number, t: number): number {
    return Math.max(0, ((n - this.now(t)) * this.windowMs) / this.size);
  }
  /** Milliseconds until full. */
  untilFull(t: number): number {
    return ((this.size - this.now(t)) * this.windowMs) / this.size;
  }
}

/** What the provider charges a call to `url` when it arrives (input + `max_tokens`): a client's exact estimate. */
export function chargeOf(url: URL): number {
  const [, , , a, b] = url.pathname.split('/');
  const output = Number(b) || 0;
  return (Number(a) || 0) + Math.max(output, Number(url.searchParams.get('max_tokens') ?? output) || 0);
}

/** A duration as OpenAI writes it (Go's): `1m0.5s`, `20ms`, `0s`, to the millisecond. */
export function goDuration(ms: number): string {
  const whole = Math.ceil(ms);
  if (whole === 0) return '0s';
  if (whole < 1000) return `${whole}ms`;
  const minutes = Math.floor(whole / 60_000);
  const seconds = Number(((whole % 60_000) / 1000).toFixed(3));
  return `${minutes > 0 ? `${minutes}m` : ''}${seconds}s`;
}

const sse = (res: http.ServerResponse) => res.writeHead(200, { 'content-type': 'text/event-stream' });
const event = (res: http.ServerResponse, data: unknown, name?: string) =>
  res.write(
    `${name ? `event: ${name}\n` : ''}data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`,
  );
const delay = (ms: number) => (ms > 0 ? new Promise((resolve) => setTimeout(resolve, ms)) : undefined);

export async function startProvider(options: ProviderOptions = {}): Promise<Provider> {
  const hold = options.hold ?? true;
  const latency = options.latencyMs ?? 0;
  let release!: () => void;
  let released = new Promise<void>((resolve) => {
    release = resolve;
  });
  let limits: Limits | undefined;
  let buckets: { requests: Bucket; tokens: Bucket } | undefined;
  const admitted = { calls: 0, tokens: 0, refused: 0 };
  const server = await startServer(async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://provider');
    const [, vendor, form, a, b] = url.pathname.split('/');
    const input = Number(a) || 0;
    const output = Number(b) || 0;
    const maxTokens = Math.max(output, Number(url.searchParams.get('max_tokens') ?? output) || 0);
    if (limits !== undefined && buckets !== undefined) {
      const now = Date.now();
      const charge = { requests: 1, tokens: input + maxTokens };
      const wait = Math.max(
        buckets.requests.waitFor(charge.requests, now),
        buckets.tokens.waitFor(charge.tokens, now),
      );
      if (wait === 0) {
        buckets.requests.level -= charge.requests;
        buckets.tokens.level -= charge.tokens;
      }
      res.setHeader('date', new Date(now).toUTCString());
      for (const unit of ['requests', 'tokens'] as const) {
        const bucket = buckets[unit];
        const remaining = String(Math.floor(bucket.now(now)));
        const untilFull = bucket.untilFull(now);
        if (vendor === 'anthropic') {
          res.setHeader(`anthropic-ratelimit-${unit}-limit`, String(bucket.size));
          res.setHeader(`anthropic-ratelimit-${unit}-remaining`, remaining);
          const full = new Date(Math.ceil((now + untilFull) / 1000) * 1000);
          res.setHeader(`anthropic-ratelimit-${unit}-reset`, full.toISOString().replace('.000Z', 'Z'));
        } else {
          res.setHeader(`x-ratelimit-limit-${unit}`, String(bucket.size));
          res.setHeader(`x-ratelimit-remaining-${unit}`, remaining);
          res.setHeader(`x-ratelimit-reset-${unit}`, goDuration(untilFull));
        }
      }
      if (wait > 0) {
        admitted.refused++;
        res.statusCode = 429;
        res.setHeader('retry-after-ms', String(Math.ceil(wait)));
        res.setHeader('retry-after', String(Math.ceil(wait / 1000)));
        res.setHeader('content-type', 'application/json');
        res.end('{"error":{"type":"rate_limit_error"}}');
        return;
      }
      admitted.calls++;
      admitted.tokens += input + output;
      const charged = buckets.tokens;
      if (limits.refund !== false && maxTokens > output) {
        res.on('finish', () => {
          charged.now(Date.now());
          charged.level = Math.min(charged.size, charged.level + maxTokens - output);
        });
      }
    }
    if (form === 'json') await delay(latency);
    if (vendor === 'openai' && form === 'json') {
      res.setHeader('content-type', 'application/json');
      res.end(
        JSON.stringify({
          object: 'chat.completion',
          choices: [{ message: { role: 'assistant', content: 'hi' } }],
          usage: { prompt_tokens: input, completion_tokens: output, total_tokens: input + output },
        }),
      );
    } else if (vendor === 'anthropic' && form === 'json') {
      res.setHeader('content-type', 'application/json');
      res.end(
        JSON.stringify({
          type: 'message',
          content: [{ type: 'text', text: 'hi' }],
          usage: { input_tokens: input, output_tokens: output },
        }),
      );
    } else if (vendor === 'openai' && form === 'sse') {
      sse(res);
      event(res, { object: 'chat.completion.chunk', choices: [{ delta: { content: 'h' } }], usage: null });
      if (hold) await released;
      await delay(latency);
      event(res, { object: 'chat.completion.chunk', choices: [{ delta: { content: 'i' } }], usage: null });
      await delay(latency);
      event(res, {
        object: 'chat.completion.chunk',
        choices: [],
        usage: { prompt_tokens: input, completion_tokens: output, total_tokens: input + output },
      });
      event(res, '[DONE]');
      res.end();
    } else if (vendor === 'anthropic' && form === 'sse') {
      sse(res);
      event(
        res,
        { type: 'message_start', message: { usage: { input_tokens: input, output_tokens: 1 } } },
        'message_start',
      );
      if (hold) await released;
      await delay(latency);
      event(
        res,
        { type: 'content_block_delta', delta: { type: 'text_delta', text: 'hi' } },
        'content_block_delta',
      );
      await delay(latency);
      event(res, { type: 'message_delta', usage: { output_tokens: output } }, 'message_delta');
      event(res, { type: 'message_stop' }, 'message_stop');
      res.end();
    } else {
      res.setHeader('content-type', 'application/json');
      res.end('{"ok":true}');
    }
  });
  return Object.assign(server, {
    admitted,
    limit(next: Limits | undefined) {
      limits = next;
      buckets =
        next === undefined
          ? undefined
          : {
              requests: new Bucket(next.requests, next.windowMs, next.empty === true),
              tokens: new Bucket(next.tokens, next.windowMs, next.empty === true),
            };
      admitted.calls = admitted.tokens = admitted.refused = 0;
    },
    release() {
      release();
      released = new Promise<void>((resolve) => {
        release = resolve;
      });
    },
  });
}
