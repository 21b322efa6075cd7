import type { IncomingMessage, ServerResponse } from 'node:http';
import { describe } from '../../duration.ts';
import { isAbortReason } from '../../http/timeouts/reasons.ts';
import { requestTimeoutOf, timeoutGaveUp } from '../../http/timeouts/registry.ts';

/**
 * Where a node:http handler's error goes under floodgate's wrappers: `onError(error, req, res)` if the
 * application gave one, else the console (as Express's and Hono's default handlers do). Either way the response
 * is ended, 500 if nothing was sent, so that the client has an answer and a held permit comes back. A wrapper
 * never rethrows: under Node's default `--unhandled-rejections=throw` a rethrown rejection ends the process.
 */
export type NodeErrorHandler = (error: unknown, req: IncomingMessage, res: ServerResponse) => void;

/** Validates the `onError` option of the node:http wrappers. */
export function errorHandler(where: string, value: unknown): NodeErrorHandler {
  if (value === undefined) return logError;
  if (typeof value !== 'function')
    throw new TypeError(`${where}: onError must be a function; got ${describe(value)}`);
  return value as NodeErrorHandler;
}

function logError(error: unknown): void {
  console.error(error);
}

/** Hands `error` to `onError`, then ends the response (500 when nothing was sent) unless `onError` did. */
export function reportError(
  onError: NodeErrorHandler,
  error: unknown,
  req: IncomingMessage,
  res: ServerResponse,
): void {
  try {
    onError(error, req, res);
  } catch (hookError) {
    // The hook failing must not become the crash it is there to prevent.
    console.error(hookError);
  }
  endWithError(res, error);
}

/** Ends `res`: 500 when nothing was sent, the connection closed when a body had started. */
export function endWithError(res: ServerResponse, error: unknown): void {
  if (res.writableEnded || res.destroyed) return;
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body =
    error instanceof Error && error.message.startsWith('floodgate:')
      ? error.message
      : 'Internal Server Error';
  res.writeHead(500, {
    'content-type': 'text/plain; charset=utf-8',
    'content-length': Buffer.byteLength(body),
  });
  res.end(body);
}

/** Calls a wrapped handler; a synchronous throw goes to `onError`. Returns what the handler returned. */
export function callHandler<Req extends IncomingMessage, Res extends ServerResponse>(
  handler: (req: Req, res: Res) => unknown,
  req: Req,
  res: Res,
  onError: NodeErrorHandler,
): unknown {
  try {
    return handler(req, res);
  } catch (error) {
    reportError(onError, error, req, res);
    return undefined;
  }
}

/**
 * A wrapped handler's promise rejected. Its own abort after the deadline is the expected end of its work, not an
 * error: the timeout's policy answers (at once, if this came within its grace). Anything else goes to `onError`.
 */
export function handlerRejected(
  onError: NodeErrorHandler,
  error: unknown,
  req: IncomingMessage,
  res: ServerResponse,
): void {
  if (requestTimeoutOf(req)?.timedOut && isAbortReason(error)) {
    timeoutGaveUp(req);
    return;
  }
  reportError(onError, error, req, res);
}
