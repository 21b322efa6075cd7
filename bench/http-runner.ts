/**
 * The HTTP overhead runner shared by `bench:http` and `bench:timeouts`: each contender serves in its own child
 * process on a free loopback port; a load generator in this process drives them in alternation, round after
 * round; medians of requests/s and of server CPU per request are compared to the bare framework.
 *
 * The load generator is `wrk` when it is on the PATH (Debian: `apt-get install wrk`; the issue's own figures
 * were taken with it), else autocannon. autocannon is JavaScript: on a 2-core machine it needs a whole core and
 * still saturates before a bare node:http server does, so it measures its own parsing of the extra header bytes
 * as much as the server. `LOADGEN=autocannon` forces it.
 *
 * `INSTRUCTIONS=1` measures instead what no other load on the machine can move: each server runs under
 * `valgrind --tool=callgrind`, takes `WARMUP` requests (default 5000) to reach its optimised code, then
 * `REQUESTS` more (default 3000) whose user-space instructions are counted and divided per request.
 *
 * `INPROC=1` measures CPU per request without sockets or a load generator: each server's request listener is
 * called in this process with a real `IncomingMessage` and `ServerResponse` on a socket that discards what is
 * written, contenders alternating in batches. What remains is the framework, the limiter and Node's own header
 * and stream work, without the kernel's loopback (which costs more than all of them on this VM).
 */
import { type ChildProcess, execFileSync, fork, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Duplex } from 'node:stream';

/** One server to measure: `name` is `'bare'` for the framework alone. */
export interface Variant {
  framework: string;
  name: string;
  start: () => Promise<http.Server>;
}

export interface RunOptions {
  /** The bench file (`import.meta.url`), started again with `--serve framework name` for each contender. */
  file: string;
  variants: () => Promise<Variant[]>;
  /** A line saying what is measured, printed above the table. */
  title: string;
  /** Whether non-2xx answers are expected (a hot key being rejected). */
  expectRejections?: boolean;
}

/**
 * Imports floodgate's module `path` (under src/, without extension) from the build in dist/, as users run it:
 * under tsx every closure floodgate makes per request would also be named by a call (esbuild's keepNames), a
 * cost the published code does not have. The bench scripts build first.
 */
export function built<T>(path: string): Promise<T> {
  return import(new URL(`../dist/${path}.js`, import.meta.url).href) as Promise<T>;
}

/** floodgate's four framework adapters, from dist/. */
export async function builtAdapters() {
  return {
    node: await built<typeof import('../src/adapters/node/index.ts')>('adapters/node/index'),
    express: await built<typeof import('../src/adapters/express/index.ts')>('adapters/express/index'),
    hono: await built<typeof import('../src/adapters/hono/index.ts')>('adapters/hono/index'),
    fastify: await built<typeof import('../src/adapters/fastify/index.ts')>('adapters/fastify/index'),
  };
}

export function listen(server: http.Server): Promise<http.Server> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

/** The entry point of a bench file: serves one variant when started with `--serve`, else runs the comparison. */
export async function runHttpBench(options: RunOptions): Promise<void> {
  if (process.argv[2] === '--serve') await serve(options);
  else if (process.env.INSTRUCTIONS === '1') await countInstructions(options);
  else if (process.env.INPROC === '1') await inProcess(options);
  else await compareThroughput(options);
}

async function serve(options: RunOptions): Promise<void> {
  const [framework, name] = process.argv.slice(3);
  const variant = (await options.variants()).find((v) => v.framework === framework && v.name === name);
  if (variant === undefined) throw new Error(`no variant ${framework} / ${name}`);
  const server = await variant.start();
  // A normal exit on SIGINT or 'exit', so that --cpu-prof and callgrind write their files.
  process.on('SIGINT', () => process.exit(0));
  // CPU time spent by this server, asked for before and after each run: on a shared machine it is a steadier
  // measure of cost per request than requests/s.
  process.on('message', (message) => {
    if (message === 'exit') process.exit(0);
    const { user, system } = process.cpuUsage();
    process.send?.({ cpu: user + system });
  });
  const port = (server.address() as AddressInfo).port;
  // Without an IPC channel (under valgrind) the port goes to stdout.
  if (process.send === undefined) console.log(`port ${port}`);
  else process.send({ port });
}

/** A served contender: its child process and port. */
export interface Served {
  child: ChildProcess;
  port: number;
}

/** Starts `--serve framework name` of `file` in a child process; `execArgv` adds Node flags (e.g. --cpu-prof). */
export async function startServer(
  file: string,
  framework: string,
  name: string,
  execArgv: string[] = [],
): Promise<Served> {
  const child = fork(new URL(file).pathname, ['--serve', framework, name], {
    execArgv: [...execArgv, '--import', 'tsx'],
    stdio: 'inherit',
  });
  const port = await new Promise<number>((resolve) =>
    child.once('message', (m: { port: number }) => resolve(m.port)),
  );
  return { child, port };
}

async function compareThroughput(options: RunOptions): Promise<void> {
  const rounds = Number(process.env.ROUNDS ?? 5);
  const duration = Number(process.env.DURATION ?? 5);
  const connections = Number(process.env.CONNECTIONS ?? 50);
  const frameworks = (process.env.FRAMEWORKS ?? 'node,express,fastify,hono').split(',');
  const chosen = (await options.variants()).filter((v) => frameworks.includes(v.framework));
  const generator = loadGenerator();
  const served = new Map<Variant, Served>();
  try {
    for (const v of chosen) served.set(v, await startServer(options.file, v.framework, v.name));
    const samples = new Map<Variant, number[]>(chosen.map((v) => [v, []]));
    const cpu = new Map<Variant, number[]>(chosen.map((v) => [v, []]));
    const rejected = new Map<Variant, number>(chosen.map((v) => [v, 0]));
    const timedOut = new Map<Variant, number>(chosen.map((v) => [v, 0]));
    // Warm-up (and, for a hot key, spend the limit).
    for (const v of chosen) await load(generator, served.get(v)!.port, 1, connections, options);
    for (let round = 0; round < rounds; round++) {
      // Rotate the order within each framework so that no contender always runs first.
      for (const framework of frameworks) {
        const group = chosen.filter((v) => v.framework === framework);
        for (let i = 0; i < group.length; i++) {
          const v = group[(i + round) % group.length];
          const { child, port } = served.get(v)!;
          const before = await cpuOf(child);
          const result = await load(generator, port, duration, connections, options);
          samples.get(v)!.push(result.perSecond);
          rejected.set(v, rejected.get(v)! + result.non2xx);
          timedOut.set(v, timedOut.get(v)! + result.timeouts);
          cpu.get(v)!.push(((await cpuOf(child)) - before) / result.total);
        }
      }
      process.stderr.write(`round ${round + 1}/${rounds} done\n`);
    }
    console.log(
      `\n${options.title}: requests/s, median of ${rounds} alternating rounds of ${duration} s, ` +
        `${connections} connections, ${generator}, Node ${process.version}, ${cpus().length} CPUs. ` +
        "'% of bare' is the median of each round's ratio to bare in the same round, with the middle half of the " +
        'rounds in brackets: the machine speeds up and slows down between rounds, and the two measured ' +
        'side by side move together',
    );
    console.log(
      'framework contender                  req/s   % of bare  (middle half)   server CPU µs/req   % of bare cost   non-2xx   timeouts',
    );
    for (const framework of frameworks) {
      const group = chosen.filter((v) => v.framework === framework);
      const bareVariant = group.find((v) => v.name === 'bare')!;
      const bareRounds = samples.get(bareVariant)!;
      const bareCpuRounds = cpu.get(bareVariant)!;
      for (const v of group) {
        const ratios = samples.get(v)!.map((x, i) => (100 * x) / bareRounds[i]);
        const costRatios = cpu.get(v)!.map((c, i) => (100 * bareCpuRounds[i]) / c);
        const [low, high] = middleHalf(ratios);
        console.log(
          `${framework.padEnd(9)} ${v.name.padEnd(23)} ${median(samples.get(v)!).toFixed(0).padStart(8)}` +
            ` ${median(ratios).toFixed(1).padStart(9)} %  ${`(${low.toFixed(0)}–${high.toFixed(0)} %)`.padStart(13)}` +
            ` ${median(cpu.get(v)!).toFixed(1).padStart(13)} µs ${median(costRatios).toFixed(1).padStart(13)} %` +
            ` ${String(rejected.get(v)).padStart(9)} ${String(timedOut.get(v)).padStart(10)}`,
        );
      }
    }
  } finally {
    for (const { child } of served.values()) child.kill();
  }
}

export type Generator = 'wrk' | 'autocannon';

export function loadGenerator(): Generator {
  if (process.env.LOADGEN === 'autocannon') return 'autocannon';
  try {
    execFileSync('wrk', ['--version'], { stdio: 'ignore' });
  } catch (error) {
    // wrk prints its version and exits 1; only a missing binary is a failure.
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
      process.stderr.write('wrk is not installed (apt-get install wrk): using autocannon\n');
      return 'autocannon';
    }
  }
  return 'wrk';
}

interface LoadResult {
  perSecond: number;
  total: number;
  non2xx: number;
  /**
   * Requests the load generator gave up on (wrk: 2 s without an answer). On a loaded machine a server can stall
   * that long; they are reported beside the figures, not taken for a broken server (which connect, read and write
   * errors are).
   */
  timeouts: number;
}

export async function load(
  generator: Generator,
  port: number,
  duration: number,
  connections: number,
  options: { expectRejections?: boolean } = {},
): Promise<LoadResult> {
  const result =
    generator === 'wrk' ? await wrk(port, duration, connections) : await cannon(port, duration, connections);
  if (result.errors > 0 || (!options.expectRejections && result.non2xx > 0)) {
    throw new Error(`port ${port}: ${result.non2xx} non-2xx, ${result.errors} errors`);
  }
  return result;
}

async function wrk(
  port: number,
  duration: number,
  connections: number,
): Promise<LoadResult & { errors: number }> {
  const args = [
    '-t1',
    `-c${connections}`,
    `-d${Math.max(1, Math.round(duration))}s`,
    `http://127.0.0.1:${port}/`,
  ];
  const out = await new Promise<string>((resolve, reject) => {
    const child = spawn('wrk', args, { stdio: ['ignore', 'pipe', 'inherit'] });
    let text = '';
    child.stdout.on('data', (chunk: Buffer) => {
      text += chunk;
    });
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0 ? resolve(text) : reject(new Error(`wrk exited ${code}: ${text}`)),
    );
  });
  const number = (pattern: RegExp): number => Number(pattern.exec(out)?.[1] ?? 0);
  const total = number(/(\d+) requests in/);
  const socketErrors = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
  return {
    perSecond: number(/Requests\/sec:\s+([\d.]+)/),
    total,
    non2xx: number(/Non-2xx or 3xx responses: (\d+)/),
    errors: socketErrors === null ? 0 : socketErrors.slice(1, 4).reduce((sum, n) => sum + Number(n), 0),
    timeouts: socketErrors === null ? 0 : Number(socketErrors[4]),
  };
}

const require = createRequire(import.meta.url);

async function cannon(
  port: number,
  duration: number,
  connections: number,
): Promise<LoadResult & { errors: number }> {
  // autocannon ships no types; this is the part used here.
  const autocannon = require('autocannon') as (options: object) => Promise<{
    requests: { average: number; total: number };
    non2xx: number;
    errors: number;
    timeouts: number;
  }>;
  const result = await autocannon({ url: `http://127.0.0.1:${port}/`, connections, duration, pipelining: 1 });
  return {
    perSecond: result.requests.average,
    total: result.requests.total,
    non2xx: result.non2xx,
    // autocannon counts its timeouts among its errors too.
    errors: result.errors - result.timeouts,
    timeouts: result.timeouts,
  };
}

function cpuOf(child: ChildProcess): Promise<number> {
  return new Promise((resolve) => {
    child.once('message', (m: { cpu: number }) => resolve(m.cpu));
    child.send('cpu');
  });
}

/** The first and third quartiles: where the middle half of the values lie. */
function middleHalf(values: number[]): [number, number] {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
  return [at(0.25), at(0.75)];
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

// ---- INSTRUCTIONS=1: user-space instructions per request, under callgrind ----

async function countInstructions(options: RunOptions): Promise<void> {
  const frameworks = (process.env.FRAMEWORKS ?? 'node,express,fastify,hono').split(',');
  const warmup = Number(process.env.WARMUP ?? 5000);
  const requests = Number(process.env.REQUESTS ?? 3000);
  const parallel = Number(process.env.PARALLEL ?? 2);
  const chosen = (await options.variants()).filter((v) => frameworks.includes(v.framework));
  const counts = new Map<Variant, number>();
  // Instruction counts do not depend on what else runs, so contenders can be measured side by side.
  const queue = [...chosen];
  await Promise.all(
    Array.from({ length: parallel }, async () => {
      for (let v = queue.shift(); v !== undefined; v = queue.shift()) {
        counts.set(v, await instructionsPerRequest(options.file, v, warmup, requests));
        process.stderr.write(`${v.framework} / ${v.name}: ${counts.get(v)!.toFixed(0)} instructions\n`);
      }
    }),
  );
  console.log(
    `\n${options.title}: server user-space instructions per request (callgrind), after ${warmup} warm-up ` +
      `requests, over ${requests}, Node ${process.version}`,
  );
  console.log('framework contender                  instructions   % of bare   added per request');
  for (const framework of frameworks) {
    const group = chosen.filter((v) => v.framework === framework);
    const bare = counts.get(group.find((v) => v.name === 'bare')!)!;
    for (const v of group) {
      const n = counts.get(v)!;
      console.log(
        `${framework.padEnd(9)} ${v.name.padEnd(23)} ${n.toFixed(0).padStart(14)} ${((100 * bare) / n).toFixed(1).padStart(9)} %` +
          ` ${(n - bare).toFixed(0).padStart(17)}`,
      );
    }
  }
}

async function instructionsPerRequest(
  file: string,
  v: Variant,
  warmup: number,
  requests: number,
): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'floodgate-callgrind-'));
  const child = spawn(
    'valgrind',
    [
      '--tool=callgrind',
      // V8 writes the code it runs: valgrind must notice code changing on the heap.
      '--smc-check=all-non-file',
      `--callgrind-out-file=${join(dir, 'out.%p')}`,
      process.execPath,
      '--import',
      'tsx',
      new URL(file).pathname,
      '--serve',
      v.framework,
      v.name,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk;
  });
  const port = await new Promise<number>((resolve, reject) => {
    let text = '';
    child.stdout.on('data', (chunk: Buffer) => {
      text += chunk;
      const match = /port (\d+)/.exec(text);
      if (match) resolve(Number(match[1]));
    });
    child.on('exit', (code) => reject(new Error(`valgrind exited ${code}: ${stderr.slice(-2000)}`)));
  });
  await requestMany(port, warmup);
  execFileSync('callgrind_control', ['--zero', String(child.pid)], { stdio: 'ignore' });
  await requestMany(port, requests);
  execFileSync('callgrind_control', ['--dump', String(child.pid)], { stdio: 'ignore' });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGINT');
  await exited;
  // The --dump file is the first numbered part; the rest of the run goes to the final file.
  const dumped = readdirSync(dir).find((f) => f.endsWith('.1'));
  if (dumped === undefined) throw new Error(`no callgrind dump in ${dir}`);
  const totals = /^totals: (\d+)/m.exec(readFileSync(join(dir, dumped), 'utf8'));
  if (totals === null) throw new Error(`no totals in ${join(dir, dumped)}`);
  return Number(totals[1]) / requests;
}

/** Sends `count` GET requests over 10 keep-alive connections and waits for every answer. */
async function requestMany(port: number, count: number): Promise<void> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 10 });
  let sent = 0;
  await new Promise<void>((resolve, reject) => {
    let done = 0;
    const one = (): void => {
      if (sent >= count) return;
      sent++;
      http
        .get({ host: '127.0.0.1', port, path: '/', agent }, (res) => {
          res.resume();
          res.on('end', () => {
            if (++done === count) resolve();
            else one();
          });
        })
        .on('error', reject);
    };
    for (let i = 0; i < 10; i++) one();
  });
  agent.destroy();
}

// ---- INPROC=1: CPU per request, in this process, without sockets ----

/** A socket that takes whatever is written and never reads. */
class Sink extends Duplex {
  readonly remoteAddress = '127.0.0.1';
  readonly remotePort = 50_000;
  readonly encrypted = false;
  override _read(): void {}
  override _write(_chunk: unknown, _encoding: string, callback: () => void): void {
    callback();
  }
  override _writev(_chunks: unknown, callback: () => void): void {
    callback();
  }
  setTimeout(): this {
    return this;
  }
  setNoDelay(): this {
    return this;
  }
}

export type Listener = (req: http.IncomingMessage, res: http.ServerResponse) => void;

/**
 * Calls a server's request listener with a real `IncomingMessage`/`ServerResponse` on a socket that discards what
 * is written (`GET /`); `finished(status)` runs when the response finishes, as node's server would see it.
 */
export function inject(listener: Listener, finished: (status: number) => void): void {
  const socket = new Sink({ decodeStrings: false });
  const req = new http.IncomingMessage(socket as never);
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
  res.assignSocket(socket as never);
  res.once('finish', () => {
    finished(res.statusCode);
    res.detachSocket(socket as never);
    // What node's server does after 'finish' (_http_server.js, emitCloseNT): without it no 'close' event ever
    // fires here, and whatever waits for it (a timeout's deadline entry) stays alive for its whole duration.
    process.nextTick(emitClose, res);
  });
  listener(req, res);
}

function emitClose(res: http.ServerResponse & { _closed?: boolean }): void {
  if (res._closed) return;
  res.destroyed = true;
  res._closed = true;
  res.emit('close');
}

async function inProcess(options: RunOptions): Promise<void> {
  const frameworks = (process.env.FRAMEWORKS ?? 'node,express,fastify,hono').split(',');
  const rounds = Number(process.env.ROUNDS ?? 9);
  const perRound = Number(process.env.REQUESTS ?? 20_000);
  const chosen = (await options.variants()).filter((v) => frameworks.includes(v.framework));
  const listeners = new Map<Variant, { server: http.Server; listener: Listener }>();
  for (const v of chosen) {
    const server = await v.start();
    listeners.set(v, { server, listener: server.listeners('request')[0] as Listener });
  }
  const statuses = new Map<Variant, Map<number, number>>(chosen.map((v) => [v, new Map()]));
  const batch = async (v: Variant, count: number): Promise<void> => {
    const { listener } = listeners.get(v)!;
    const seen = statuses.get(v)!;
    // Yield every 100 requests: responses finish on later ticks, and their nextTick work must not pile up.
    for (let i = 0; i < count; i += 100) {
      for (let j = 0; j < 100; j++) {
        inject(listener, (status) => seen.set(status, (seen.get(status) ?? 0) + 1));
      }
      await new Promise(setImmediate);
    }
  };
  const samples = new Map<Variant, number[]>(chosen.map((v) => [v, []]));
  for (const v of chosen) await batch(v, perRound); // warm-up (and, for a hot key, spend the limit)
  for (let round = 0; round < rounds; round++) {
    for (const framework of frameworks) {
      const group = chosen.filter((v) => v.framework === framework);
      for (let i = 0; i < group.length; i++) {
        const v = group[(i + round) % group.length];
        const start = process.cpuUsage();
        await batch(v, perRound);
        const used = process.cpuUsage(start);
        samples.get(v)!.push((used.user + used.system) / perRound);
      }
    }
  }
  for (const { server } of listeners.values()) server.close();
  console.log(
    `\n${options.title}: CPU µs per request in process (no sockets), median of ${rounds} alternating rounds of ` +
      `${perRound}, Node ${process.version}`,
  );
  console.log(
    "'× bare' and '× floodgate' are the medians of each round's ratio to the bare framework and to floodgate " +
      'measured in the same round (the rounds alternate, so a pair ran under the same load): on a shared ' +
      'machine these ratios hold where the µs do not',
  );
  console.log('framework contender                  µs/request   added   × bare   × floodgate   statuses');
  for (const framework of frameworks) {
    const group = chosen.filter((v) => v.framework === framework);
    const bareRounds = samples.get(group.find((v) => v.name === 'bare')!)!;
    const bare = median(bareRounds);
    const floodgateRounds = samples.get(group.find((v) => v.name === 'floodgate')!);
    for (const v of group) {
      const m = median(samples.get(v)!);
      const perRound = (of: number[]) => median(samples.get(v)!.map((x, i) => x / of[i])).toFixed(3);
      const toFloodgate = floodgateRounds === undefined ? '' : perRound(floodgateRounds);
      const seen = [...statuses.get(v)!].map(([status, n]) => `${status}×${n}`).join(' ');
      console.log(
        `${framework.padEnd(9)} ${v.name.padEnd(23)} ${m.toFixed(2).padStart(10)} ${(m - bare).toFixed(2).padStart(7)}` +
          ` ${perRound(bareRounds).padStart(8)} ${toFloodgate.padStart(13)}   ${seen}`,
      );
    }
    // BASELINE=…: floodgate against the other build, paired round by round (the rounds alternate, so each pair
    // ran under the same load), and the added CPU of each against the bare framework of its round.
    const base = group.find((v) => v.name === 'floodgate (baseline)');
    const ours = group.find((v) => v.name === 'floodgate');
    if (base !== undefined && ours !== undefined) {
      const b = samples.get(base)!;
      const o = samples.get(ours)!;
      const bareSamples = samples.get(group.find((v) => v.name === 'bare')!)!;
      const total = median(o.map((x, i) => x / b[i]));
      const added = median(o.map((x, i) => (x - bareSamples[i]) / (b[i] - bareSamples[i])));
      console.log(
        `${framework.padEnd(9)} floodgate / baseline, paired per round: CPU ×${total.toFixed(3)}, added CPU ×${added.toFixed(3)}`,
      );
    }
  }
}
