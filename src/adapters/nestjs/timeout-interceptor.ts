import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  type CallHandler,
  type ExecutionContext,
  Inject,
  Injectable,
  type NestInterceptor,
} from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { RequestTimeoutContext } from '../../http/timeouts/context.ts';
import type { RequestTimeouts, TimeoutAdapter } from '../../http/timeouts/engine.ts';
import { answerResponse, watchResponse } from '../../http/timeouts/node-response.ts';
import { attachRequestTimeout, requestTimeoutOf } from '../../http/timeouts/registry.ts';
import type { TimeoutRouteSetting } from '../../http/timeouts/route.ts';
import { TIMEOUT_METADATA } from './timeout-decorators.ts';
import { FLOODGATE_TIMEOUTS_ENGINE } from './tokens.ts';

const adapter: TimeoutAdapter = {
  expire: (context) => answerResponse(context.target as ServerResponse, context.current!),
  describe: (context) => {
    const req = (context.target as ServerResponse).req as IncomingMessage | undefined;
    return { route: req?.url?.split('?', 1)[0], method: req?.method };
  },
};

/**
 * The interceptor that times HTTP handlers: register it as `APP_INTERCEPTOR`. At the deadline the policy's answer
 * (504 by default) is written on the response at once, even when the handler ignores its signal; what the handler
 * (or an exception filter) sends later is dropped. The request's timeout is `requestTimeoutOf(request)` (its
 * `signal`, `deadline`), and `@TimeoutSignal()` gives the signal as a parameter. Interceptors run after guards:
 * the deadline starts after them (time in a rate limiter's queue is not counted).
 */
export class FloodgateTimeoutInterceptor implements NestInterceptor {
  readonly #settings = new WeakMap<object, WeakMap<object, TimeoutRouteSetting | null>>();

  constructor(
    readonly engine: RequestTimeouts,
    private readonly reflector: Reflector,
  ) {}

  intercept(context: ExecutionContext, next: CallHandler) {
    if (context.getType() !== 'http') return next.handle();
    const http = context.switchToHttp();
    const request = http.getRequest<{ raw?: IncomingMessage } & IncomingMessage>();
    const response = http.getResponse<{ raw?: ServerResponse } & ServerResponse>();
    const req = request.raw ?? request;
    const res = response.raw ?? response;
    if ((requestTimeoutOf(req) as RequestTimeoutContext | undefined)?.engine !== this.engine) {
      const timeout = this.engine.start(adapter, res);
      const setting = this.settingOf(context.getClass(), context.getHandler());
      if (setting !== null) timeout.apply(setting);
      attachRequestTimeout(req, timeout);
      if (request !== req) attachRequestTimeout(request, timeout);
      watchResponse(res, timeout);
    }
    return next.handle();
  }

  /** A handler's setting from its (or its controller's) decorator, or null for the default; checked once. */
  settingOf(controller: object, handler: object): TimeoutRouteSetting | null {
    let byHandler = this.#settings.get(controller);
    if (byHandler === undefined) {
      byHandler = new WeakMap();
      this.#settings.set(controller, byHandler);
    }
    let setting = byHandler.get(handler);
    if (setting === undefined) {
      const value = this.reflector.getAllAndOverride<unknown>(TIMEOUT_METADATA, [
        handler as never,
        controller as never,
      ]);
      const where = `@Timeout() on ${(controller as { name?: string }).name ?? 'a controller'}.${(handler as { name?: string }).name ?? 'handler'}`;
      setting = value === undefined ? null : this.engine.route(value, where);
      byHandler.set(handler, setting);
    }
    return setting;
  }
}

Injectable()(FloodgateTimeoutInterceptor);
Inject(FLOODGATE_TIMEOUTS_ENGINE)(FloodgateTimeoutInterceptor, undefined as never, 0);
Inject(Reflector)(FloodgateTimeoutInterceptor, undefined as never, 1);
