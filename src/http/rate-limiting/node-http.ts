import type { IncomingMessage, ServerResponse } from 'node:http';
import { requestTimeoutOf } from '../timeouts/registry.ts';
import { type Decision, outcomeOfStatus, type RateLimiting } from './engine.ts';
import type { Answer } from './response.ts';

/**
 * node `ServerResponse` plumbing for the adapters on node's objects (node:http, Express, Fastify, Koa, Nest, Hono
 * under node-server): the disconnect signal for queued requests, holding a lease until the response ends, the
 * refund rule asked at its end, and writing answers. Hooks see the framework's own objects; nothing here wraps them.
 */

/**
 * The signal a queued request waits with: the request timeout's when the timeouts middleware runs (it aborts on
 * disconnect and at the deadline, so queue time counts against the deadline), otherwise one that aborts when the
 * client goes away.
 */
export function waitSignal(req: IncomingMessage, res: ServerResponse): AbortSignal {
  const timeout = requestTimeoutOf(req);
  if (timeout !== undefined) return timeout.signal;
  const controller = new AbortController();
  const onClose = (): void => {
    if (!res.writableFinished) controller.abort(new DOMException('The client disconnected', 'AbortError'));
  };
  // Not `req.destroyed`: a request whose body was read to the end is destroyed while its client waits.
  if (res.destroyed || res.closed || req.socket?.destroyed) onClose();
  else res.once('close', onClose);
  return controller.signal;
}

/** Releases a held lease when the response finishes or the client goes away, whichever comes first. */
export function holdUntilEnd(engine: RateLimiting, res: ServerResponse, decision: Decision): void {
  if (decision.heldSince < 0) return;
  if (res.closed || res.destroyed) {
    engine.release(decision);
    return;
  }
  const release = (): void => engine.release(decision, outcomeOfStatus(res.writableFinished, res.statusCode));
  res.once('close', release);
  res.once('finish', release);
}

/** Writes a rejection on a plain node response. */
export function writeRejection(res: ServerResponse, answer: Answer): void {
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of answer.headers) headers[name] = value;
  // `Headers` joins repeated fields with ', ', which is right for every field but Set-Cookie.
  if (answer.headers instanceof Headers && answer.headers.has('set-cookie')) {
    headers['set-cookie'] = answer.headers.getSetCookie();
  }
  headers['content-length'] = String(Buffer.byteLength(answer.body));
  res.writeHead(answer.status, headers);
  res.end(answer.body);
}

export function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as PromiseLike<unknown> | null)?.then === 'function';
}

/** Sets one header field on a node response (the writer `setLimitHeaders` calls per field). */
export function setHeader(res: ServerResponse, name: string, value: string): void {
  res.setHeader(name, value);
}

/**
 * Asks the route's refund rule once the response finished, or — counted as failed — once the client went away
 * first. Exactly once, whichever comes first.
 */
export function refundWhenDone<Req, Res>(
  engine: RateLimiting,
  request: Req,
  response: Res,
  res: ServerResponse,
  decision: Decision,
): void {
  if (res.writableFinished || res.destroyed) {
    engine.finished(decision, request, response, res.writableFinished, res.statusCode);
    return;
  }
  const done = (): void => {
    res.off('finish', done);
    res.off('close', done);
    engine.finished(decision, request, response, res.writableFinished, res.statusCode);
  };
  res.once('finish', done);
  res.once('close', done);
}

/** Runs `done` once, when `res` finishes or closes. */
export function whenDone(res: ServerResponse, done: () => void): void {
  if (res.writableFinished || res.destroyed) {
    done();
    return;
  }
  const once = (): void => {
    res.off('finish', once);
    res.off('close', once);
    done();
  };
  res.once('finish', once);
  res.once('close', once);
}
