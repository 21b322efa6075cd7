import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Next } from 'koa';
import type { Answers, Verdict } from '../../http/rate-limiting/flow.ts';
import type { RateLimitInfo } from '../../http/rate-limiting/info.ts';
import { waitSignal } from '../../http/rate-limiting/node-http.ts';
import type { Answer } from '../../http/rate-limiting/response.ts';

/** How the rate-limiting flow answers on Koa: fields and permits on the node response, rejections through `ctx`. */

/** What the flow touches of Koa's `ctx`. */
export interface Ctx {
  req: IncomingMessage;
  res: ServerResponse;
  state: { rateLimit?: RateLimitInfo };
  status: number;
  body: unknown;
  respond?: boolean;
  headerSent: boolean;
  set(name: string, value: string | string[]): void;
}

/** Whether an `onRejected` hook answered by itself: it set a body, wrote the response, or took it over. */
function answered(ctx: Ctx): boolean {
  return ctx.body !== undefined && ctx.body !== null ? true : ctx.headerSent || ctx.respond === false;
}

function send(ctx: Ctx, answer: Answer): void {
  ctx.status = answer.status;
  for (const [name, value] of answer.headers) ctx.set(name, value);
  // `Headers` joins repeated fields with ', ', which is right for every field but Set-Cookie.
  if (answer.headers instanceof Headers && answer.headers.has('set-cookie')) {
    ctx.set('set-cookie', answer.headers.getSetCookie());
  }
  ctx.body = answer.body;
}

export const ctxAnswers: Answers<Ctx> = {
  // The request timeout's signal when `requestTimeouts()` runs first, else one that aborts when the client goes away.
  signal: (ctx) => waitSignal(ctx.req, ctx.res),
  // Watched on the node response: the body Koa writes after the chain settles (a stream, a file) still holds it.
  node: (ctx) => ctx.res,
  timeout: (ctx) => ctx.req,
  info: (ctx, info) => {
    ctx.state.rateLimit = info;
  },
  // On the node response, as Koa's own ctx.set() does after checks this path does not need (the head is not out).
  header: (ctx, name, value) => {
    ctx.res.setHeader(name, value);
  },
  sent: (ctx) => ctx.headerSent,
  answeredBy: answered,
  send,
};

// An admitted request goes on; a rejection or a request that left the queue ends here, resolved.
export function continueWith(verdict: Verdict, next: Next): Promise<unknown> {
  return typeof verdict === 'string' ? Promise.resolve() : next();
}
