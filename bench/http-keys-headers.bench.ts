// Rough per-call costs of the client-key and response-header helpers (run: node --import tsx bench/http-keys-headers.bench.ts).
// Not a test: numbers vary by machine; compare them with each other.
import { clientIp } from '../src/http/client-ip.ts';
import { type PolicyState, partitionKeyHasher, rateLimitHeaders } from '../src/http/ratelimit-headers.ts';
import type { HttpRequest } from '../src/http/request.ts';

/** Touches the result so that the work is not optimised away, without costing much itself. */
function size(result: unknown): number {
  return typeof result === 'string' ? result.length : Array.isArray(result) ? result.length : 1;
}

function measure(name: string, iterations: number, run: (i: number) => unknown): void {
  let sink = 0;
  for (let i = 0; i < iterations / 10; i++) sink += size(run(i)); // warm up
  const start = performance.now();
  for (let i = 0; i < iterations; i++) sink += size(run(i));
  const ns = ((performance.now() - start) * 1e6) / iterations;
  console.log(`${name.padEnd(58)} ${ns.toFixed(0).padStart(6)} ns/call${sink === 0 ? ' ' : ''}`);
}

const request = (remoteAddress: string, headers: Record<string, string> = {}): HttpRequest => ({
  remoteAddress,
  method: 'GET',
  path: '/',
  header: (name) => headers[name],
});

const N = 500_000;
const plain = clientIp();
const trusted = clientIp({ trustedProxies: ['10.0.0.0/8', 'fd00::/8'] });
const v4 = Array.from({ length: 1000 }, (_, i) => request(`198.51.${i >> 8}.${i & 255}`));
const mapped = Array.from({ length: 1000 }, (_, i) => request(`::ffff:198.51.${i >> 8}.${i & 255}`));
const v6 = Array.from({ length: 1000 }, (_, i) => request(`2001:db8:${i.toString(16)}::1`));
const v6Many = Array.from({ length: 5000 }, (_, i) => request(`2001:db8:${i.toString(16)}::1`));
const proxied = Array.from({ length: 1000 }, (_, i) =>
  request('10.0.0.1', { 'x-forwarded-for': `6.6.6.6, 198.51.${i >> 8}.${i & 255}` }),
);
measure('clientIp() IPv4 peer', N, (i) => plain(v4[i % 1000]));
measure('clientIp() IPv4-mapped peer', N, (i) => plain(mapped[i % 1000]));
measure('clientIp() IPv6 peer, 1000 clients (cached)', N, (i) => plain(v6[i % 1000]));
measure('clientIp() IPv6 peer, 5000 clients (cache churns)', N, (i) => plain(v6Many[i % 5000]));
measure('clientIp({ trustedProxies }) untrusted IPv4 peer', N, (i) => trusted(v4[i % 1000]));
measure('clientIp({ trustedProxies }) X-Forwarded-For via proxy', N, (i) => trusted(proxied[i % 1000]));

const keys = Array.from({ length: 1000 }, (_, i) => `198.51.${i >> 8}.${i & 255}`);
const state = (key: string): PolicyState => ({
  name: 'api',
  limit: 100,
  windowMs: 60_000,
  remaining: 42,
  resetAfterMs: 12_345,
  partitionKey: key,
});
const states = keys.map(state);
const uncached = partitionKeyHasher({ cacheSize: 0 });
const cached = partitionKeyHasher();
measure('rateLimitHeaders draft-10, no pk', N, (i) =>
  rateLimitHeaders([{ ...states[i % 1000], partitionKey: undefined }], ['draft-10']),
);
measure('rateLimitHeaders draft-10, pk uncached (sha-256 each call)', N, (i) =>
  rateLimitHeaders([states[i % 1000]], ['draft-10'], { partitionKeys: uncached }),
);
measure('rateLimitHeaders draft-10, pk cached (1000 keys)', N, (i) =>
  rateLimitHeaders([states[i % 1000]], ['draft-10'], { partitionKeys: cached }),
);
measure('pk hash alone, uncached', N, (i) => uncached(keys[i % 1000]));
measure('rateLimitHeaders draft-7 + legacy', N, (i) =>
  rateLimitHeaders([states[i % 1000]], ['draft-7', 'legacy']),
);
