/**
 * The dependency of `bench:overload:sockets`, in its own process: an HTTP server with `SLOTS` slots, each call
 * holding one for a service time of `SERVICE_MS` × U(0.5, 1.5); calls beyond wait in FIFO order. A call whose
 * caller gave up is still served when its turn comes (wasted work, as a database finishes an abandoned query).
 * `POST /reset` answers every waiting call 503 (between runs). Tells its parent its port; exits with it.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

const SLOTS = Number(process.env.SLOTS);
const SERVICE_MS = Number(process.env.SERVICE_MS);
const waiting: http.ServerResponse[] = [];
let busy = 0;

function pump(): void {
  while (busy < SLOTS && waiting.length > 0) {
    const res = waiting.shift()!;
    busy++;
    setTimeout(
      () => {
        busy--;
        if (!res.destroyed) res.end('ok');
        pump();
      },
      SERVICE_MS * (0.5 + Math.random()),
    );
  }
}

const server = http.createServer((req, res) => {
  if (req.method === 'POST') {
    for (const w of waiting.splice(0)) if (!w.destroyed) w.writeHead(503).end();
    res.end(JSON.stringify({ busy }));
    return;
  }
  waiting.push(res);
  pump();
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => process.send!({ port: (server.address() as AddressInfo).port }));
process.on('disconnect', () => process.exit(0));
