/** A Koa application over a real socket, for the Koa adapter's tests. */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Router from '@koa/router';
import Koa from 'koa';

export interface Running {
  url: string;
  app: Koa;
  /** Errors the app's 'error' event saw. */
  errors: unknown[];
  close(): Promise<void>;
}

/** Starts `setup(app, router)` on a free port; the router is mounted after whatever `setup` installed. */
export function start(setup: (app: Koa, router: Router) => void): Promise<Running> {
  const app = new Koa();
  const errors: unknown[] = [];
  app.on('error', (error: unknown) => errors.push(error));
  const router = new Router();
  setup(app, router);
  app.use(router.routes());
  const server = http.createServer(app.callback());
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      resolve({
        url: `http://127.0.0.1:${port}`,
        app,
        errors,
        close: () =>
          new Promise<void>((done) => {
            server.closeAllConnections();
            server.close(() => done());
          }),
      });
    });
  });
}

/** Runs `check` against a started app, and closes it whatever happens. */
export async function using(running: Promise<Running>, check: (r: Running) => Promise<void>): Promise<void> {
  const r = await running;
  try {
    await check(r);
  } finally {
    await r.close();
  }
}

/** A GET on a fresh connection. */
export async function get(
  url: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Headers; body: string }> {
  const response = await fetch(url, { headers });
  return { status: response.status, headers: response.headers, body: await response.text() };
}

/** A promise the test settles by hand: a handler that waits for it holds its request open. */
export function gate(): { promise: Promise<void>; open(): void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}

/** Waits (by polling, never asserting a duration) until `condition()` holds. */
export async function until(condition: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (condition()) return;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** A clock the test moves by hand (limiters without a queue need no timers). */
export function clock(start = 0) {
  return {
    t: start,
    now() {
      return this.t;
    },
  };
}
