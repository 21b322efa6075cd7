/**
 * The measured process of `bench:timed-out` (bench/timed-out-instructions.bench.ts): one Express app behind
 * floodgate's timeouts middleware, taking bursts of requests on command from its parent. Plain JavaScript, run
 * without tsx: tsx's loader hooks live on a thread of their own in Node 20, whose work callgrind counted with the
 * requests (up to 10 000 instructions per request in one child and none in the other).
 *
 *   node bench/timed-out-child.mjs <in-time|timed-out> <burst> <late ms> <batch>
 *
 * stdin: `go` (a burst; answers `done <CPU µs per request> <statuses>`), `gc` (a full collection; answers `gc`),
 * `exit`. Requests go to the app's request listener directly (`inject`, as bench/http-runner.ts does it): a real
 * `IncomingMessage`/`ServerResponse` on a socket that discards what is written.
 */
import http from 'node:http';
import { createRequire } from 'node:module';
import { createInterface } from 'node:readline';
import { Duplex } from 'node:stream';

const DEADLINE_MS = 20;
const IN_TIME_MS = 10_000;
const [kind, burstArg, lateArg, batchArg] = process.argv.slice(2);
const BURST = Number(burstArg);
const LATE_MS = Number(lateArg);
const BATCH = Number(batchArg);

const express = createRequire(import.meta.url)('express');
// FLOODGATE_DIST: another build to measure (an older commit's), else this checkout's dist/.
const dist = process.env.FLOODGATE_DIST
  ? `file://${process.env.FLOODGATE_DIST}/`
  : new URL('../dist/', import.meta.url);
const floodgate = await import(new URL('adapters/express/index.js', dist).href);

let wrote = 0;
const app = express();
app.use(floodgate.requestTimeouts({ default: kind === 'in-time' ? IN_TIME_MS : DEADLINE_MS }));
// Every handler writes at LATE_MS: after the 504 when timed out (the write is dropped), well within the deadline
// otherwise. Requests live equally long either way, so the garbage collector does not tell them apart.
// The write comes LATE_MS after the handler ran by the clock, not by the event loop's: a timer set while the loop
// is busy counts from the loop's clock at the start of its turn, and under valgrind on a loaded machine a turn
// outlasted 3 s, so some handlers wrote at once, before their 20 ms deadline (a 200 among the 504s).
app.get('/', (_req, res) => {
  const due = performance.now() + LATE_MS;
  const write = () => {
    const left = due - performance.now();
    if (left > 0) setTimeout(write, left);
    else {
      res.send('late or not');
      wrote++;
    }
  };
  setTimeout(write, LATE_MS);
});
const listener = http.createServer(app).listeners('request')[0];

class Sink extends Duplex {
  remoteAddress = '127.0.0.1';
  remotePort = 50_000;
  encrypted = false;
  _read() {}
  _write(_chunk, _encoding, callback) {
    callback();
  }
  _writev(_chunks, callback) {
    callback();
  }
  setTimeout() {
    return this;
  }
  setNoDelay() {
    return this;
  }
}

function inject(finished) {
  const socket = new Sink({ decodeStrings: false });
  const req = new http.IncomingMessage(socket);
  req.method = 'GET';
  req.url = '/';
  req.headers = { host: '127.0.0.1', accept: '*/*' };
  req.rawHeaders = ['Host', '127.0.0.1', 'Accept', '*/*'];
  req.httpVersion = '1.1';
  req.httpVersionMajor = 1;
  req.httpVersionMinor = 1;
  req.complete = true;
  req.push(null);
  const res = new http.ServerResponse(req);
  res.assignSocket(socket);
  res.once('finish', () => {
    finished(res.statusCode);
    res.detachSocket(socket);
    // What node's server does after 'finish' (emitCloseNT): the timeout's deadline entry waits for 'close'.
    process.nextTick(emitClose, res);
  });
  listener(req, res);
}

function emitClose(res) {
  if (res._closed) return;
  res.destroyed = true;
  res._closed = true;
  res.emit('close');
}

async function burst() {
  const seen = new Map();
  let finished = 0;
  wrote = 0;
  const done = (status) => {
    seen.set(status, (seen.get(status) ?? 0) + 1);
    finished++;
  };
  const start = process.cpuUsage();
  // In batches, as a server reads them, yielding between batches (so that the loop's clock moves on).
  for (let i = 0; i < BURST; i += BATCH) {
    for (let j = i; j < Math.min(BURST, i + BATCH); j++) inject(done);
    await new Promise(setImmediate);
  }
  // Until every response finished and every handler's write came.
  while (finished < BURST || wrote < BURST) await new Promise((resolve) => setTimeout(resolve, 50));
  await new Promise(setImmediate);
  const used = process.cpuUsage(start);
  const statuses = [...seen].map(([status, n]) => `${status}×${n}`).join(' ');
  return `done ${(used.user + used.system) / BURST} ${statuses}`;
}

const lines = createInterface({ input: process.stdin });
console.log('ready');
for await (const line of lines) {
  if (line === 'exit') break;
  if (line === 'gc') {
    globalThis.gc?.();
    console.log('gc');
  } else console.log(await burst());
}
lines.close();
process.exit(0);
