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
const REPRESENTATION = new Set([
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
]);

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
  // Only the headers present: a response has a few, and each removeHeader() validates and lower-cases its name.
  // (Removing an absent one would only set node's flags for content-length and transfer-encoding, which the
  // content-length set below makes moot.)
  for (const name of res.getHeaderNames()) if (REPRESENTATION.has(name)) res.removeHeader(name);
  for (const [name, value] of policy.headers) res.setHeader(name, value);
  res.setHeader('content-length', policy.body.length);
  res.writeHead(policy.status, policy.statusMessage);
  res.end(policy.body);
  dropLateWrites(res);
  return 'answered';
}

/**
 * Makes `res` swallow every later write without an error. One prototype swap per timed-out response, to a
 * prototype made once per original prototype (Express gives its responses its own): twelve own properties
 * shadowing the methods would reshape each response, ~45–60 µs on Express's objects against ~2 µs for the swap.
 * The price: Express sets a response's prototype again when the request enters or leaves a mounted sub-app, so
 * writes made after a timed-out request moved between apps are no longer dropped (they fail as writes after the
 * end do without floodgate, into Express's error handling).
 */
export function dropLateWrites(res: ServerResponse): void {
  const proto = Object.getPrototypeOf(res) as object;
  if (droppers.has(proto)) return; // already dropping
  let dropper = dropping.get(proto);
  if (dropper === undefined) {
    dropper = Object.create(proto, DROPPED) as object;
    dropping.set(proto, dropper);
    droppers.add(dropper);
  }
  Object.setPrototypeOf(res, dropper);
}

/** The dropping prototype made for each original prototype. */
const dropping = new WeakMap<object, object>();
/** The dropping prototypes themselves. */
const droppers = new WeakSet<object>();

function returnThis(this: unknown): unknown {
  return this;
}

function nothing(): void {}

const method = (value: unknown): PropertyDescriptor => ({ value, writable: true, configurable: true });
const DROPPED: PropertyDescriptorMap = {
  writeHead: method(returnThis),
  setHeader: method(returnThis),
  setHeaders: method(returnThis),
  appendHeader: method(returnThis),
  removeHeader: method(nothing),
  flushHeaders: method(nothing),
  writeContinue: method(nothing),
  writeProcessing: method(nothing),
  writeEarlyHints: method(nothing),
  addTrailers: method(nothing),
  write: method(droppedWrite),
  end: method(droppedEnd),
};

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
  // The callback is the first function among the arguments (end(cb), end(chunk, cb), end(chunk, encoding, cb)).
  const cb =
    typeof chunk === 'function'
      ? chunk
      : typeof encoding === 'function'
        ? encoding
        : typeof callback === 'function'
          ? callback
          : undefined;
  if (cb !== undefined) process.nextTick(cb as () => void);
  // The late handler's own end is how Express and callback-style handlers tell us they are done.
  const context = (this as TimeoutHolder)[kRequestTimeout] as RequestTimeoutContext | undefined;
  if (context && !context.doneByPromise) context.handlerDone();
  return this;
}
