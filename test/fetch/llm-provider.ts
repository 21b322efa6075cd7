/**
 * An imitation LLM provider over a real socket: OpenAI- and Anthropic-shaped answers with their `usage`, as JSON
 * or as a server-sent-events stream whose usage comes in its last events, and its own limits (requests and
 * tokens per window), reported in each vendor's rate-limit fields; past them, a `429` with `retry-after-ms` and
 * `Retry-After`. A stream can be held after its first event until the test says `release()`, to show the client
 * reads it as it arrives.
 */
import type * as http from 'node:http';
import { startServer, type TestServer } from './server.ts';

export interface Provider extends TestServer {
  /** Lets held streams send their remaining events. */
  release(): void;
  /** Its limits from now on, a fresh window (default: none). */
  limit(limits: Limits | undefined): void;
}

/** Requests and tokens per window, in a fixed window that starts at `limit()`. */
export interface Limits {
  requests: number;
  tokens: number;
  windowMs: number;
}

const sse = (res: http.ServerResponse) => res.writeHead(200, { 'content-type': 'text/event-stream' });
const event = (res: http.ServerResponse, data: unknown, name?: string) =>
  res.write(
    `${name ? `event: ${name}\n` : ''}data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`,
  );

/** Paths: `/openai/json/<in>/<out>`, `/openai/sse/<in>/<out>`, `/anthropic/json/…`, `/anthropic/sse/…`, `/none`. */
export async function startProvider(): Promise<Provider> {
  let release!: () => void;
  let released = new Promise<void>((resolve) => {
    release = resolve;
  });
  let limits: Limits | undefined;
  let windowStart = 0;
  let requests = 0;
  let tokens = 0;
  const server = await startServer(async (req, res) => {
    const [, vendor, form, a, b] = (req.url ?? '').split('/');
    const input = Number(a);
    const output = Number(b);
    if (limits !== undefined) {
      const now = Date.now();
      if (now - windowStart >= limits.windowMs) {
        windowStart = now;
        requests = tokens = 0;
      }
      const resetMs = windowStart + limits.windowMs - now;
      const refused = requests + 1 > limits.requests || tokens + input + output > limits.tokens;
      if (!refused) {
        requests++;
        tokens += input + output;
      }
      const left = { requests: limits.requests - requests, tokens: limits.tokens - tokens };
      res.setHeader('date', new Date(now).toUTCString());
      for (const unit of ['requests', 'tokens'] as const) {
        if (vendor === 'anthropic') {
          res.setHeader(`anthropic-ratelimit-${unit}-limit`, String(limits[unit]));
          res.setHeader(`anthropic-ratelimit-${unit}-remaining`, String(left[unit]));
          res.setHeader(
            `anthropic-ratelimit-${unit}-reset`,
            new Date(windowStart + limits.windowMs).toISOString(),
          );
        } else {
          res.setHeader(`x-ratelimit-limit-${unit}`, String(limits[unit]));
          res.setHeader(`x-ratelimit-remaining-${unit}`, String(left[unit]));
          res.setHeader(`x-ratelimit-reset-${unit}`, `${(resetMs / 1000).toFixed(3)}s`);
        }
      }
      if (refused) {
        res.statusCode = 429;
        res.setHeader('retry-after-ms', String(resetMs));
        res.setHeader('retry-after', String(Math.ceil(resetMs / 1000)));
        res.end('{"error":{"type":"rate_limit_error"}}');
        return;
      }
    }
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
      await released;
      event(res, { object: 'chat.completion.chunk', choices: [{ delta: { content: 'i' } }], usage: null });
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
      await released;
      event(
        res,
        { type: 'content_block_delta', delta: { type: 'text_delta', text: 'hi' } },
        'content_block_delta',
      );
      event(res, { type: 'message_delta', usage: { output_tokens: output } }, 'message_delta');
      event(res, { type: 'message_stop' }, 'message_stop');
      res.end();
    } else {
      res.setHeader('content-type', 'application/json');
      res.end('{"ok":true}');
    }
  });
  return Object.assign(server, {
    limit(next: Limits | undefined) {
      limits = next;
      windowStart = Date.now();
      requests = tokens = 0;
    },
    release() {
      release();
      released = new Promise<void>((resolve) => {
        release = resolve;
      });
    },
  });
}
