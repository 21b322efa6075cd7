import { once } from 'node:events';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';

/** What a test server saw: one entry per request that reached it. */
export interface Hit {
  method: string;
  path: string;
  at: number;
}

/** Answers one request; the default says 200 `ok`. */
export type Respond = (req: http.IncomingMessage, res: http.ServerResponse, hit: number) => void;

/** A real HTTP server on 127.0.0.1, on a free port, that counts what reaches it. */
export interface TestServer {
  origin: string;
  url(path?: string): string;
  hits: Hit[];
  respond: Respond;
  close(): Promise<void>;
}

export async function startServer(respond?: Respond): Promise<TestServer> {
  const hits: Hit[] = [];
  const state: TestServer = {
    origin: '',
    url: (path = '/') => `${state.origin}${path}`,
    hits,
    respond: respond ?? ((_req, res) => res.end('ok')),
    async close() {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
  const server = http.createServer((req, res) => {
    hits.push({ method: req.method ?? '', path: req.url ?? '', at: performance.now() });
    // Drain any request body so the connection can be reused.
    req.resume();
    state.respond(req, res, hits.length);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  state.origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return state;
}

/** A clock the test moves by hand (no timers are mocked: HTTP needs real ones). */
export function handClock(start = 1_000): { now(): number; advance(ms: number): void } {
  let t = start;
  return {
    now: () => t,
    advance(ms) {
      t += ms;
    },
  };
}
