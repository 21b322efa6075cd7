// A client calling an LLM provider at 3× its token limit (run: npm run bench:cost:client). The imitation provider
// of the test suite (test/fetch/llm-provider.ts: buckets of requests and tokens refilled continuously over a
// minute, starting empty as after a burst; a call charged its input + max_tokens on arrival and given back the
// output it did not use once its answer ended; each vendor's rate-limit fields; 429 with retry-after-ms past
// them) listens on a real socket; calls arrive at a fixed rate (open loop) worth LOAD × its token rate in real
// tokens, half of them streamed (server-sent events), for SECONDS, through each client in turn, both dialects,
// rounds alternating the order:
//   - plain `fetch` (naive: no limiter);
//   - a count-only limiter: floodgate with a tokenBucket of requests at the provider's token rate ÷ the mean real
//     cost of a call (what a user without token accounting would set), provider fields ignored (`pause: false`);
//   - floodgate paced to the provider's fields, estimate input + max_tokens, settled from the usage (llmUsage), its
//     own limiter never the bottleneck.
// Measured: 429s among the calls sent after the client's first answer, and the real tokens the provider admitted
// ÷ its token rate × the run. Not a test: timings are real and the machine is shared.
// Env: SECONDS (default 20), LOAD (default 3), TPM (tokens per minute, default 60000), ROUNDS (default 1).
import { llmUsage, rateLimitedFetch } from '../src/fetch/index.ts';
import { tokenBucket } from '../src/index.ts';
import { chargeOf, startProvider } from '../test/fetch/llm-provider.ts';

const SECONDS = Number(process.env.SECONDS ?? 20);
const LOAD = Number(process.env.LOAD ?? 3);
const TPM = Number(process.env.TPM ?? 60_000);
const ROUNDS = Number(process.env.ROUNDS ?? 1);
const WINDOW_MS = 60_000;
const perMs = TPM / WINDOW_MS;

const provider = await startProvider({ hold: false, latencyMs: 5 });

/** Calls of random size: input 100–300, max_tokens 100–300, output half of max_tokens to all of it. */
function* calls(seed: number) {
  let a = seed >>> 0;
  const random = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  for (let i = 0; ; i++) {
    const input = 100 + Math.floor(200 * random());
    const max = 100 + Math.floor(200 * random());
    const output = Math.round(max * (0.5 + 0.5 * random()));
    yield { input, max, output, form: i % 2 === 0 ? 'json' : 'sse' };
  }
}
const MEAN_REAL = 200 + 200 * 0.75;

type Client = (url: string, init: RequestInit) => Promise<Response>;
type Contender = { name: string; make: (inner: typeof fetch) => Client };

const contenders: Contender[] = [
  { name: 'plain fetch (naive)', make: (inner) => inner },
  {
    name: 'count-only limiter (requests)',
    make: (inner) =>
      rateLimitedFetch({
        fetch: inner,
        limiter: tokenBucket({
          tokenLimit: 1,
          tokensPerPeriod: 1,
          period: Math.round(MEAN_REAL / perMs),
          queueLimit: 1_000_000,
        }),
        pause: false,
      }),
  },
  {
    name: 'floodgate, paced to the provider fields',
    make: (inner) =>
      rateLimitedFetch({
        fetch: inner,
        limiter: tokenBucket({
          tokenLimit: 1_000_000,
          tokensPerPeriod: 1_000_000,
          period: '1s',
          queueLimit: 1_000_000_000,
          unit: 'tokens',
        }),
        cost: { estimate: chargeOf, actual: llmUsage },
        pause: { jitter: 0 },
      }),
  },
];

interface Result {
  sent: number;
  refusedAfterFirst: number;
  refused: number;
  throughput: number;
}

async function run(contender: Contender, dialect: string, seed: number): Promise<Result> {
  provider.limit({ requests: 100_000, tokens: TPM, windowMs: WINDOW_MS, empty: true });
  let firstAnswer = Number.POSITIVE_INFINITY;
  const result = { sent: 0, refusedAfterFirst: 0, refused: 0, throughput: 0 };
  // Each attempt as it reaches the network: when it left, and what came back.
  const inner: typeof fetch = async (input, init) => {
    const sentAt = performance.now();
    result.sent++;
    const response = await fetch(input, init);
    firstAnswer = Math.min(firstAnswer, performance.now());
    if (response.status === 429) {
      result.refused++;
      if (sentAt > firstAnswer) result.refusedAfterFirst++;
    }
    return response;
  };
  const client = contender.make(inner);
  const stop = new AbortController();
  const pending: Promise<void>[] = [];
  const start = performance.now();
  const end = start + SECONDS * 1000;
  let next = start;
  for (const call of calls(seed)) {
    if (next >= end) break;
    const wait = next - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    const url = provider.url(`/${dialect}/${call.form}/${call.input}/${call.output}?max_tokens=${call.max}`);
    pending.push(
      client(url, { method: 'POST', body: '{}', signal: stop.signal })
        .then((response) => response.arrayBuffer())
        .then(
          () => {},
          () => {}, // aborted at the end of the run, waiting or reading
        ),
    );
    next += (call.input + call.output) / (LOAD * perMs);
  }
  const wait = end - performance.now();
  if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  const elapsed = performance.now() - start;
  result.throughput = provider.admitted.tokens / (perMs * elapsed);
  stop.abort();
  await Promise.all(pending);
  return result;
}

console.log(
  `cost-client bench: ${TPM} tokens a minute (bucket starting empty), offered ${LOAD}× that in real tokens, ` +
    `${SECONDS} s per client, ${ROUNDS} round(s), Node ${process.version}`,
);
const table = new Map<string, Result[]>();
for (let round = 0; round < ROUNDS; round++) {
  const order = round % 2 === 0 ? contenders : [...contenders].reverse();
  for (const dialect of ['openai', 'anthropic']) {
    for (const contender of order) {
      const r = await run(contender, dialect, 1000 + round);
      const key = `${dialect}|${contender.name}`;
      table.set(key, [...(table.get(key) ?? []), r]);
      console.log(
        `  ${dialect.padEnd(9)} ${contender.name.padEnd(40)} sent ${String(r.sent).padStart(5)}  429s ${String(r.refused).padStart(5)} (after the first answer ${r.refusedAfterFirst})  throughput ${(r.throughput * 100).toFixed(1)} %`,
      );
    }
  }
}
console.log(
  '\n| dialect | client | 429s after the first answer | 429s | calls sent | throughput ÷ token limit |',
);
console.log('| --- | --- | --- | --- | --- | --- |');
for (const [key, results] of table) {
  const [dialect, name] = key.split('|');
  const sum = (f: (r: Result) => number) => results.reduce((s, r) => s + f(r), 0);
  const mean = (f: (r: Result) => number) => sum(f) / results.length;
  console.log(
    `| ${dialect} | ${name} | ${sum((r) => r.refusedAfterFirst)} | ${sum((r) => r.refused)} | ${sum((r) => r.sent)} | ${(mean((r) => r.throughput) * 100).toFixed(1)} % |`,
  );
}
await provider.close();
