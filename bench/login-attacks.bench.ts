/**
 * Attacks on a login form, played over sockets against real Express servers on one simulated hour: floodgate's
 * recipe from docs/login.md (bench/login-recipe.ts) beside rate-limiter-flexible's published one
 * (bench/login-rlf.ts), on the same attacks, one fresh server each.
 *
 *   npm run bench:login
 *
 * Time is simulated: Node's mocked `Date` and `setTimeout` (rate-limiter-flexible's clock and expiry timers),
 * which floodgate reads as its injected clock, jump from one attempt to the next. Every attacker honours
 * `Retry-After` (retrying sooner only collects more 429s) and otherwise tries once a second per address; an
 * address is an `X-Forwarded-For` value the server trusts. A "guess" is an attempt whose password was checked
 * and answered (200 or 401); a 429 tells the attacker nothing.
 */
import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { mock } from 'node:test';
import type express from 'express';
import { loginApp } from './login-recipe.ts';
import { rlfLoginApp } from './login-rlf.ts';

const HOUR = 3_600_000;
const PACE = 1000;
const START = Date.UTC(2026, 0, 1);

checkGuide();
mock.timers.enable({ apis: ['Date', 'setTimeout'], now: START });
const clock = { now: () => Date.now() };

const recipes: { name: string; app: () => express.Express }[] = [
  { name: 'floodgate (docs/login.md)', app: () => loginApp(clock) },
  { name: 'rate-limiter-flexible (wiki recipe)', app: rlfLoginApp },
];

/** The guide's recipe must be the one measured: its snippet, imports aside, equals bench/login-recipe.ts. */
function checkGuide(): void {
  const recipe = readFileSync(new URL('./login-recipe.ts', import.meta.url), 'utf8').split('// ---\n')[1];
  const guide = readFileSync(new URL('../docs/login.md', import.meta.url), 'utf8');
  const snippet = /```ts\n([\s\S]*?)```/.exec(guide)?.[1] ?? '';
  const body = (text: string) => text.replace(/^import .*\n/gm, '').trim();
  if (body(snippet) !== body(recipe)) {
    throw new Error('docs/login.md no longer shows bench/login-recipe.ts: measure what the guide says');
  }
}

interface Server {
  port: number;
  agent: http.Agent;
  close(): Promise<void>;
}

async function serve(app: express.Express): Promise<Server> {
  app.set('trust proxy', true);
  const server = http.createServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  return {
    port: (server.address() as AddressInfo).port,
    agent,
    close: () =>
      new Promise<void>((resolve) => {
        agent.destroy();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** One login attempt from `ip`: the status, and Retry-After in ms on a 429. */
function attempt(s: Server, ip: string, username: string, password: string): Promise<[number, number]> {
  const body = JSON.stringify({ username, password });
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        port: s.port,
        host: '127.0.0.1',
        path: '/login',
        method: 'POST',
        agent: s.agent,
        headers: { 'content-type': 'application/json', 'x-forwarded-for': ip },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve([res.statusCode ?? 0, Number(res.headers['retry-after'] ?? 1) * 1000]));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** Someone who tries to log in: from `ip`, next at `next`, with the credentials `guess` gives. */
interface Actor {
  ip: string;
  next: number;
  guess(): [username: string, password: string];
  /** Told each answer; returns false when the actor is done. */
  answered?(status: number, at: number): boolean;
}

interface Tally {
  guesses: number;
  refused: number;
  requests: number;
}

/** Plays `actors` until `end` (simulated), jumping the clock from one attempt to the next. */
async function play(s: Server, actors: Actor[], end: number): Promise<Tally> {
  const tally: Tally = { guesses: 0, refused: 0, requests: 0 };
  const live = new Set(actors);
  while (live.size > 0) {
    let actor: Actor | undefined;
    for (const a of live) if (actor === undefined || a.next < actor.next) actor = a;
    if (actor === undefined || actor.next >= end) break;
    if (actor.next > Date.now()) mock.timers.tick(actor.next - Date.now());
    const [username, password] = actor.guess();
    const [status, retryMs] = await attempt(s, actor.ip, username, password);
    tally.requests++;
    if (status === 429) tally.refused++;
    else if (status === 200 || status === 401) tally.guesses++;
    else throw new Error(`unexpected status ${status}`);
    const now = Date.now();
    if (actor.answered?.(status, now) === false) live.delete(actor);
    actor.next = status === 429 ? now + retryMs : now + PACE;
  }
  return tally;
}

const wrong = (): [string, string] => ['victim', `guess-${Math.random()}`];

/** The real user logs in from her usual address at `at`, retrying after each 429: how long until she is in. */
function alice(at: number, passwords: string[], report: (waitMs: number) => void): Actor {
  let i = 0;
  let first = Number.NaN;
  return {
    ip: '192.0.2.10',
    next: at,
    guess: () => ['alice', passwords[Math.min(i, passwords.length - 1)]],
    answered(status, now) {
      if (Number.isNaN(first)) first = now;
      if (status === 200) {
        report(now - first);
        return false;
      }
      if (status === 401) i++;
      return true;
    },
  };
}

type Scenario = { label: string; run(s: Server, t0: number): Promise<string> };

const scenarios: Scenario[] = [
  {
    label: '(a) one address guessing one user’s password',
    async run(s, t0) {
      const t = await play(s, [{ ip: '203.0.113.1', next: t0, guess: wrong }], t0 + HOUR);
      return `${t.guesses} guesses`;
    },
  },
  {
    label: '(b) credential stuffing: 1 000 addresses against one user',
    async run(s, t0) {
      const actors = Array.from({ length: 1000 }, (_, i) => ({
        ip: `198.18.${i >> 8}.${i & 255}`,
        next: t0 + i,
        guess: wrong,
      }));
      const t = await play(s, actors, t0 + HOUR);
      return `${t.guesses} guesses`;
    },
  },
  {
    label: '(c) password spraying: one address against 1 000 users',
    async run(s, t0) {
      let n = 0;
      const sprayer: Actor = {
        ip: '203.0.113.9',
        next: t0,
        guess: () => [`user-${n++ % 1000}`, 'Summer2026!'],
      };
      const t = await play(s, [sprayer], t0 + HOUR);
      return `${t.guesses} guesses`;
    },
  },
  {
    label: '(d) the real user: three typos, then the right password',
    async run(s, t0) {
      let waited = Number.NaN;
      await play(s, [alice(t0, ['right-alice'], () => {})], t0 + HOUR);
      const typos = ['right-alcie', 'rihgt-alice', 'right-Alice', 'right-alice'];
      await play(s, [alice(t0 + 60_000, typos, (ms) => (waited = ms))], t0 + HOUR);
      return Number.isNaN(waited) ? 'not in within the hour' : `in ${waited / 1000} s after the first typo`;
    },
  },
  {
    label: '(e) 50 addresses try to lock the real user out; she logs in at 30 min from her usual address',
    async run(s, t0) {
      let waited = Number.NaN;
      await play(s, [alice(t0, ['right-alice'], () => {})], t0 + HOUR);
      const attackers: Actor[] = Array.from({ length: 50 }, (_, i) => ({
        ip: `198.51.100.${i}`,
        next: t0 + 1000 + i,
        guess: () => ['alice', `guess-${Math.random()}`],
      }));
      const t = await play(
        s,
        [...attackers, alice(t0 + HOUR / 2, ['right-alice'], (ms) => (waited = ms))],
        t0 + HOUR,
      );
      const her = Number.isNaN(waited) ? 'not in within the hour' : `in after ${waited / 1000} s`;
      return `${her} (attackers: ${t.guesses - 1} guesses)`;
    },
  },
];

const rows: string[][] = [];
for (const scenario of scenarios) {
  const row = [scenario.label];
  for (const recipe of recipes) {
    const server = await serve(recipe.app());
    try {
      row.push(await scenario.run(server, Date.now()));
    } finally {
      await server.close();
    }
  }
  rows.push(row);
  console.error(row.join(' | '));
}

const machine = `${process.platform} ${process.arch}, Node ${process.version}`;
console.log(
  `\nnpm run bench:login, ${new Date(performance.timeOrigin).toISOString().slice(0, 10)}, ${machine}`,
);
console.log('per hour of attack; attackers try once a second per address and honour Retry-After\n');
console.log(`| attack | ${recipes.map((r) => r.name).join(' | ')} |`);
console.log(`| --- | ${recipes.map(() => '---').join(' | ')} |`);
for (const row of rows) console.log(`| ${row.join(' | ')} |`);
