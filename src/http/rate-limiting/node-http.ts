import type { IncomingMessage, ServerResponse } from 'node:http';
import type { HttpRequest } from '../request.ts';
import { requestTimeoutOf } from '../timeouts/registry.ts';
import type { Decision, RateLimiting } from './engine.ts';
import type { Answer } from './response.ts';
import type { RouteLimits } from './route.ts';

/**
 * node `IncomingMessage` plumbing shared by the node:http, Express and Fastify adapters: a lazy request view,
 * the disconnect signal for queued requests, holding a lease until the response ends, and writing answers.
 */

/** The {@link HttpRequest} view of a node request. Nothing is parsed until a key function asks. */
export class NodeRequestView implements HttpRequest {
  #path: string | undefined;
  constructor(readonly raw: IncomingMessage) {}

  get remoteAddress(): string | undefined {
    return this.raw.socket?.remoteAddress;
  }

  get method(): string {
    return this.raw.method ?? 'GET';
  }

  get path(): string {
    if (this.#path === undefined) {
      const url = this.raw.url ?? '/';
      const q = url.indexOf('?');
      this.#path = q < 0 ? url : url.slice(0, q);
    }
    return this.#path;
  }

  header(name: string): string | string[] | undefined {
    return this.raw.headers[name];
  }
}

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

/** Sets the rate-limit header fields of an admitted request and holds its lease until the response ends. */
export function admit(
  engine: RateLimiting,
  view: NodeRequestView,
  res: ServerResponse,
  decision: Decision,
): void {
  if (engine.options.headers.length > 0 && decision.lease !== undefined && !res.headersSent) {
    engine.setHeaders(view, decision, res, setHeader);
  }
  holdUntilEnd(engine, res, decision);
}

/** `engine.setHeaders`' writer for a node response. */
export function setHeader(res: ServerResponse, name: string, value: string): void {
  res.setHeader(name, value);
}

/** Releases a held lease when the response finishes or the client goes away, whichever comes first. */
export function holdUntilEnd(engine: RateLimiting, res: ServerResponse, decision: Decision): void {
  if (decision.heldSince < 0) return;
  if (res.closed || res.destroyed) {
    engine.release(decision);
    return;
  }
  const release = (): void => engine.release(decision);
  res.once('close', release);
  res.once('finish', release);
}

/**
 * Calls `onRejected` (awaited when it returns a promise) and, unless it answered by itself, sends the
 * rejection. Without a hook the answer is written straight from the engine's fields.
 */
export function reject<Req, Res>(
  engine: RateLimiting,
  view: NodeRequestView,
  res: ServerResponse,
  decision: Decision,
  request: Req,
  response: Res,
  sent: () => boolean,
  write: (answer: Answer) => void,
): void | Promise<void> {
  const hook = decision.route.onRejected;
  if (hook === undefined) {
    if (!engine.options.dryRun) write(engine.rejection(view, decision));
    return;
  }
  const context = engine.rejectedContext(view, decision, request, response);
  const outcome = hook(context);
  const finish = (): void => {
    if (engine.options.dryRun || sent() || res.destroyed) return;
    write(context);
  };
  if (isThenable(outcome)) return Promise.resolve(outcome).then(finish);
  finish();
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

function noSignal(): undefined {
  return undefined;
}

export function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as PromiseLike<unknown> | null)?.then === 'function';
}

/**
 * Decides one node:http request (node and Express adapters alike) and continues: `next()` when admitted (headers
 * set, a held permit watched), the rejection written when not, `next(error)` when the key function or
 * `onRejected` throws — a bad request fails itself, never the server. A canceled request (the client left the
 * queue) gets nothing.
 */
export function decideAndContinue(
  engine: RateLimiting,
  route: RouteLimits,
  req: IncomingMessage,
  res: ServerResponse,
  next: (error?: unknown) => void,
): void {
  const view = new NodeRequestView(req);
  let decision: Decision | Promise<Decision>;
  try {
    decision = engine.decide(view, route, route.mayQueue ? () => waitSignal(req, res) : noSignal);
  } catch (error) {
    next(error);
    return;
  }
  if (isThenable(decision)) decision.then((d) => proceed(engine, view, req, res, d, next), next);
  else proceed(engine, view, req, res, decision, next);
}

function proceed(
  engine: RateLimiting,
  view: NodeRequestView,
  req: IncomingMessage,
  res: ServerResponse,
  decision: Decision,
  next: (error?: unknown) => void,
): void {
  if (decision.result === 'canceled') return;
  if (decision.lease !== undefined && !decision.lease.granted) {
    let done: void | Promise<void>;
    try {
      done = reject(
        engine,
        view,
        res,
        decision,
        req,
        res,
        () => res.headersSent,
        (context) => writeRejection(res, context),
      );
    } catch (error) {
      next(error);
      return;
    }
    if (!engine.options.dryRun) {
      if (isThenable(done)) done.then(undefined, next);
      return;
    }
    if (isThenable(done)) {
      done.then(() => {
        admit(engine, view, res, decision);
        next();
      }, next);
      return;
    }
  }
  admit(engine, view, res, decision);
  next();
}
