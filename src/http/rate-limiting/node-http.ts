import type { IncomingMessage, ServerResponse } from 'node:http';
import { requestTimeoutOf, timeoutGaveUp } from '../timeouts/registry.ts';
import { type Decision, outcomeOfStatus, type RateLimiting } from './engine.ts';
import type { RateLimitInfo } from './info.ts';
import type { Answer } from './response.ts';
import type { RouteLimits } from './route.ts';
import type { RouteMetrics } from './route-metrics.ts';

/**
 * node `IncomingMessage` plumbing shared by the node:http, Express and Fastify adapters: the disconnect signal for
 * queued requests, holding a lease until the response ends, and writing answers. Hooks see the framework's own
 * objects; nothing here wraps them.
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

/**
 * How one framework answers on node responses (`Res` is its response: `ServerResponse`, Fastify's reply). Static
 * functions, so that deciding a request allocates nothing for them.
 */
export interface NodeAnswers<Res> {
  /** Whether something was sent already (an `onRejected` hook may answer by itself). */
  sent(response: Res): boolean;
  /** Sends a rejection. */
  send(response: Res, answer: Answer): void;
  /** Sets one header field of an admitted request. */
  header(response: Res, name: string, value: string): void;
  /** Puts the rate-limit info where the framework's handlers read it (`req.rateLimit`, `request.rateLimit`). */
  info(request: unknown, info: RateLimitInfo): void;
}

/** `req.rateLimit`, on node's request (node:http and Express). */
export function setRequestInfo(request: unknown, info: RateLimitInfo): void {
  (request as { rateLimit?: RateLimitInfo }).rateLimit = info;
}

/** `engine.setHeaders`' writer for a node response. */
export function setHeader(res: ServerResponse, name: string, value: string): void {
  res.setHeader(name, value);
}

const plainAnswers: NodeAnswers<ServerResponse> = {
  sent: (res) => res.headersSent,
  send: writeRejection,
  header: setHeader,
  info: setRequestInfo,
};

/** Decides one node:http or Express request and continues: see {@link decideOnNode}. */
export function decideAndContinue(
  engine: RateLimiting,
  route: RouteLimits,
  req: IncomingMessage,
  res: ServerResponse,
  next: (error?: unknown) => void,
  metrics?: RouteMetrics,
): void {
  decideOnNode(engine, route, req, res, res, plainAnswers, next, metrics);
}

/**
 * Decides one request on node's `IncomingMessage` (node:http, Express and Fastify alike) and continues: `next()`
 * when admitted (headers set, a held permit watched), the rejection sent when not, `next(error)` when the key
 * function or `onRejected` throws — a bad request fails itself, never the server. A canceled request (the client
 * left the queue) gets nothing. `request` and `response` are the framework's objects: key functions and
 * `onRejected` see them; `res` is the node response under them.
 */
export function decideOnNode<Req, Res>(
  engine: RateLimiting,
  route: RouteLimits,
  request: Req,
  response: Res,
  res: ServerResponse,
  answers: NodeAnswers<Res>,
  next: (error?: unknown) => void,
  /** The route's metric attributes under its template, when the adapter knows it. */
  metrics?: RouteMetrics,
): void {
  let decision: Decision | Promise<Decision>;
  try {
    decision = engine.decide(request, response, route, responseSignal, res, metrics);
  } catch (error) {
    next(error);
    return;
  }
  if (isThenable(decision)) {
    decision.then((d) => proceed(engine, request, response, res, answers, d, next), next);
  } else proceed(engine, request, response, res, answers, decision, next);
}

function responseSignal(res: ServerResponse): AbortSignal {
  return waitSignal(res.req, res);
}

function proceed<Req, Res>(
  engine: RateLimiting,
  request: Req,
  response: Res,
  res: ServerResponse,
  answers: NodeAnswers<Res>,
  decision: Decision,
  next: (error?: unknown) => void,
): void {
  if (decision.result === 'canceled') {
    // Left the queue at its deadline (or the client left): the timeout answers now, without a handler's grace.
    timeoutGaveUp(res.req);
    return;
  }
  if (decision.lease !== undefined) answers.info(request, decision);
  if (decision.lease !== undefined && !decision.lease.granted) {
    let done: void | Promise<void>;
    try {
      done = reject(engine, request, response, res, answers, decision);
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
        admit(engine, request, response, res, answers, decision);
        next();
      }, next);
      return;
    }
  }
  admit(engine, request, response, res, answers, decision);
  next();
}

/** Sets the rate-limit header fields of an admitted request and holds its lease until the response ends. */
function admit<Req, Res>(
  engine: RateLimiting,
  request: Req,
  response: Res,
  res: ServerResponse,
  answers: NodeAnswers<Res>,
  decision: Decision,
): void {
  if (engine.options.headers.length > 0 && decision.lease !== undefined && !answers.sent(response)) {
    engine.setHeaders(decision, response, answers.header);
  }
  holdUntilEnd(engine, res, decision);
  if (decision.refundable) refundWhenDone(engine, request, response, res, decision);
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

/**
 * Calls `onRejected` (awaited when it returns a promise) and, unless it answered by itself, sends the
 * rejection. Without a hook the answer is sent straight from the engine's fields.
 */
function reject<Req, Res>(
  engine: RateLimiting,
  request: Req,
  response: Res,
  res: ServerResponse,
  answers: NodeAnswers<Res>,
  decision: Decision,
): void | Promise<void> {
  const hook = decision.route.onRejected;
  if (hook === undefined) {
    if (!engine.options.dryRun) answers.send(response, engine.rejection(decision));
    return;
  }
  const context = engine.rejectedContext(decision, request, response);
  const outcome = hook(context);
  const finish = (): void => {
    if (engine.options.dryRun || answers.sent(response) || res.destroyed) return;
    answers.send(response, context);
  };
  if (isThenable(outcome)) return Promise.resolve(outcome).then(finish);
  finish();
}
