import type { ServerResponse } from 'node:http';
import type { RequestTimeoutContext } from './context.ts';
import type { TimeoutPolicy } from './policy.ts';
import { attachRequestTimeout, kRequestTimeout, type TimeoutHolder } from './registry.ts';

/**
 * Node `ServerResponse` handling shared by the node:http, Express and Fastify adapters: noticing when the
 * response closes, answering at the deadline, and dropping what a late handler writes afterwards.
 */

/** Watches `res` for the request's end: complete, or the client gone. One shared listener, no closure. */
export function watchResponse(res: ServerResponse, context: RequestTimeoutContext): void {
  attachRequestTimeout(res, context);
  res.on('close', onResponseClose);
}

function onResponseClose(this: ServerResponse): void {
  const context = (this as TimeoutHolder)[kRequestTimeout] as RequestTimeoutContext | undefined;
  context?.responseClosed(this.writableFinished);
}

// Headers that describe the handler's body; they would be wrong on the policy's answer. Everything else the
// handler or earlier middleware set (CORS, request ids, RateLimit fields, cookies) is kept.
const REPRESENTATION = [
  'content-type',
  'content-length',
  'content-encoding',
  'content-language',
  'content-location',
  'content-range',
  'content-disposition',
  'transfer-encoding',
  'etag',
  'last-modified',
  'trailer',
] as const;

/**
 * Sends the policy's answer on `res` if nothing was sent yet; otherwise ends the started response by closing
 * the connection, the only way a client can tell that a chunked or fixed-length body was cut. Either way, later
 * writes by the handler are dropped.
 */
export function answerResponse(res: ServerResponse, policy: TimeoutPolicy): 'answered' | 'cut' | 'handler' {
  if (res.writableEnded || res.destroyed) {
    // Answered by an 'abort' listener: what the handler writes after the deadline is dropped all the same.
    dropLateWrites(res);
    return 'handler';
  }
  if (res.headersSent) {
    dropLateWrites(res);
    res.destroy();
    return 'cut';
  }
  for (const name of REPRESENTATION) res.removeHeader(name);
  for (const [name, value] of policy.headers) res.setHeader(name, value);
  res.setHeader('content-length', policy.body.length);
  res.writeHead(policy.status, policy.statusMessage);
  res.end(policy.body);
  dropLateWrites(res);
  return 'answered';
}

/** Makes `res` swallow every later write without an error (own properties shadow the prototype's methods). */
export function dropLateWrites(res: ServerResponse): void {
  const r = res as unknown as Record<string, unknown>;
  r.writeHead = returnThis;
  r.setHeader = returnThis;
  r.setHeaders = returnThis;
  r.appendHeader = returnThis;
  r.removeHeader = nothing;
  r.flushHeaders = nothing;
  r.writeContinue = nothing;
  r.writeProcessing = nothing;
  r.writeEarlyHints = nothing;
  r.addTrailers = nothing;
  r.write = droppedWrite;
  r.end = droppedEnd;
}

function returnThis(this: unknown): unknown {
  return this;
}

function nothing(): void {}

function droppedWrite(_chunk: unknown, encoding?: unknown, callback?: unknown): boolean {
  const cb = typeof encoding === 'function' ? encoding : callback;
  if (typeof cb === 'function') process.nextTick(cb as () => void);
  return true;
}

function droppedEnd(
  this: ServerResponse,
  chunk?: unknown,
  encoding?: unknown,
  callback?: unknown,
): ServerResponse {
  const cb = [chunk, encoding, callback].find((a) => typeof a === 'function');
  if (cb) process.nextTick(cb as () => void);
  // The late handler's own end is how Express and callback-style handlers tell us they are done.
  const context = (this as TimeoutHolder)[kRequestTimeout] as RequestTimeoutContext | undefined;
  if (context && !context.doneByPromise) context.handlerDone();
  return this;
}
