import type { Writable } from 'node:stream';
import peerRequire from '../peer-require.cts';
import type { KeysOptions } from './args.ts';
import { KEYS_SCRIPT } from './keys-script.ts';

/** The few ioredis methods `floodgate keys` uses, on one node. */
interface Node {
  scan(cursor: string, ...args: (string | number)[]): Promise<[string, string[]]>;
  eval(script: string, keys: number, ...args: string[]): Promise<unknown>;
  disconnect(): void;
}

/** What one key holds, as `show` and `list` print it. */
export interface KeyReport {
  key: string;
  redisKey: string;
  /** False when Redis does not hold it: never seen, or back to full and expired. */
  found: boolean;
  /** `time-based` (a window's or bucket's state) or `concurrency` (leases). */
  kind?: 'time-based' | 'concurrency';
  lockedForMs?: number;
  /** Milliseconds until Redis drops the key (it is back to full then); -1: no expiry. */
  expiresInMs?: number;
  /** Permits held by leases (a concurrency key). */
  heldPermits?: number;
  /** The Redis type of a key that matched the limiter's layout but is not floodgate's (left alone). */
  foreign?: string;
}

/** A refusal or a failure to report, with the exit status. */
class KeysError extends Error {}

interface Io {
  out: Writable;
  err: Writable;
}

/**
 * Runs `floodgate keys`; resolves to the exit code (1 when it refuses: no floodgate keys of that limiter, or a
 * key that is not floodgate's).
 */
export async function runKeys(options: KeysOptions, io: Io): Promise<number> {
  let ioredis: typeof import('ioredis') | undefined;
  try {
    ioredis = peerRequire('ioredis') as typeof import('ioredis');
  } catch {}
  if (ioredis === undefined) {
    io.err.write('floodgate keys: needs the ioredis package (npm install ioredis)\n');
    return 1;
  }
  const { Redis, Cluster } = ioredis;
  const quiet = { maxRetriesPerRequest: 1, enableOfflineQueue: true, lazyConnect: false };
  const client = options.cluster
    ? new Cluster(
        options.cluster.map((n) => {
          const at = n.lastIndexOf(':');
          return { host: n.slice(0, at), port: Number(n.slice(at + 1)) };
        }),
        { redisOptions: quiet, clusterRetryStrategy: () => null },
      )
    : new Redis(options.redis!, { ...quiet, retryStrategy: () => null });
  client.on('error', () => {});
  try {
    const masters: Node[] = client instanceof Cluster ? await mastersOf(client) : [client as unknown as Node];
    const any = client as unknown as Node;
    const layout = new Layout(options);
    if (options.action === 'list') return await list(options, layout, masters, any, io);
    const hint = await findOne(layout, masters, any);
    if (hint === undefined) throw new KeysError(noKeys(options));
    const redisKey = layout.keyOf(options.key!);
    const before = await inspect(any, redisKey, options.key!);
    if (before.foreign !== undefined) throw new KeysError(foreign(before));
    if (options.action === 'show') {
      print(io, options, [before]);
      return 0;
    }
    const op = { reset: 'z', unlock: 'u', lock: 'l' }[options.action];
    const kind = hint.kind === 'concurrency' ? 'zset' : 'string';
    await any.eval(KEYS_SCRIPT, 1, redisKey, op, String(Math.ceil(options.durationMs ?? 0)), '1000', kind);
    const after = await inspect(any, redisKey, options.key!);
    if (options.json) io.out.write(`${JSON.stringify({ action: options.action, ...after })}\n`);
    else io.out.write(`${options.action} ${JSON.stringify(options.key)}: done\n${describeKey(after)}\n`);
    return 0;
  } catch (error) {
    io.err.write(`floodgate keys: ${error instanceof KeysError ? error.message : String(error)}\n`);
    return 1;
  } finally {
    client.disconnect();
  }
}

/** A Cluster's masters, in a stable order (the cursor of `list` names one by its index). */
async function mastersOf(cluster: import('ioredis').Cluster): Promise<Node[]> {
  await cluster.ping();
  const nodes = cluster.nodes('master');
  const address = (n: { options: { host?: string; port?: number } }) => `${n.options.host}:${n.options.port}`;
  return nodes.sort((a, b) => address(a).localeCompare(address(b))) as unknown as Node[];
}

/**
 * Where a limiter's keys are: `prefix{key}:name` by default, `prefix{tag}name:key` with a constant hash tag
 * (the layouts of `store.partitioned`).
 */
class Layout {
  readonly pattern: string;
  private readonly head: string;
  private readonly tail: string;
  constructor(private readonly options: KeysOptions) {
    const { prefix, limiter, hashTag } = options;
    if (hashTag === undefined) {
      this.head = `${prefix}{`;
      this.tail = `}:${limiter}`;
      this.pattern = `${glob(this.head)}*${glob(this.tail)}`;
    } else {
      this.head = `${prefix}{${hashTag}}${limiter}:`;
      this.tail = '';
      this.pattern = `${glob(this.head)}*`;
    }
  }
  keyOf(key: string): string {
    return `${this.head}${key}${this.tail}`;
  }
  /** The partition key of a Redis key the pattern matched (undefined: not of this layout after all). */
  partKeyOf(redisKey: string): string | undefined {
    if (!redisKey.startsWith(this.head) || !redisKey.endsWith(this.tail)) return undefined;
    const key = redisKey.slice(this.head.length, redisKey.length - this.tail.length);
    // The default layout's key is a hash tag: it holds no brace.
    if (this.options.hashTag === undefined && /[{}]/.test(key)) return undefined;
    return key;
  }
}

/** `text` matched literally by SCAN's MATCH. */
function glob(text: string): string {
  return text.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}

/** The first key of the limiter, scanning every master; undefined when there is none. */
async function findOne(layout: Layout, masters: Node[], any: Node): Promise<KeyReport | undefined> {
  for (const node of masters) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', layout.pattern, 'COUNT', 1000);
      for (const redisKey of keys) {
        const key = layout.partKeyOf(redisKey);
        if (key === undefined) continue;
        const report = await inspect(any, redisKey, key);
        if (report.found && report.foreign === undefined) return report;
      }
      cursor = next;
    } while (cursor !== '0');
  }
  return undefined;
}

async function list(
  options: KeysOptions,
  layout: Layout,
  masters: Node[],
  any: Node,
  io: Io,
): Promise<number> {
  let [index, cursor] = options.cursor === undefined ? [0, '0'] : parseCursor(options.cursor);
  if (index >= masters.length)
    throw new KeysError(`--cursor ${options.cursor} names no master of this server`);
  const found: { key: string; redisKey: string }[] = [];
  // SCAN's COUNT is a hint of work per call, not of answers: keep going until a page is full or all is seen.
  while (index < masters.length && found.length < options.count) {
    const [next, keys] = await masters[index].scan(cursor, 'MATCH', layout.pattern, 'COUNT', options.count);
    for (const redisKey of keys) {
      const key = layout.partKeyOf(redisKey);
      if (key !== undefined) found.push({ key, redisKey });
    }
    cursor = next;
    if (cursor === '0') index++;
  }
  const more = index < masters.length ? (masters.length > 1 ? `${index}:${cursor}` : cursor) : null;
  const reports: KeyReport[] = [];
  for (const { key, redisKey } of found) reports.push(await inspect(any, redisKey, key));
  // A first page that is all there is, with no key of floodgate's: a name or prefix it does not recognise.
  if (options.cursor === undefined && more === null && !reports.some((r) => r.found && !r.foreign)) {
    throw new KeysError(noKeys(options));
  }
  if (options.json) {
    io.out.write(`${JSON.stringify({ limiter: options.limiter, keys: reports, cursor: more })}\n`);
    return 0;
  }
  print(io, options, reports);
  io.out.write(
    more === null
      ? `(${reports.length} keys; that is all)\n`
      : `(${reports.length} keys; more: floodgate keys list ${options.limiter} … --cursor ${more})\n`,
  );
  return 0;
}

function parseCursor(text: string): [number, string] {
  const [a, b] = text.split(':');
  return b === undefined ? [0, a] : [Number(a), b];
}

/** One key's state, read by the script; a key that is not floodgate's is refused. */
async function inspect(node: Node, redisKey: string, key: string): Promise<KeyReport> {
  const reply = String(await node.eval(KEYS_SCRIPT, 1, redisKey, 'i'));
  if (reply === '') return { key, redisKey, found: false };
  if (reply.startsWith('foreign')) return { key, redisKey, found: true, foreign: reply.split(',')[1] };
  const [type, locked, pttl, held] = reply.split(',');
  return {
    key,
    redisKey,
    found: true,
    kind: type === 'zset' ? 'concurrency' : 'time-based',
    lockedForMs: Number(locked),
    expiresInMs: Number(pttl),
    ...(type === 'zset' ? { heldPermits: Number(held) } : {}),
  };
}

function print(io: Io, options: KeysOptions, reports: KeyReport[]): void {
  if (options.json) {
    for (const r of reports) io.out.write(`${JSON.stringify(r)}\n`);
    return;
  }
  for (const r of reports) io.out.write(`${describeKey(r)}\n`);
}

/** One line per key: what the person on call reads. */
export function describeKey(r: KeyReport): string {
  if (!r.found) return `${JSON.stringify(r.key)}  not in Redis (never seen, or back to full)`;
  if (r.foreign !== undefined)
    return `${JSON.stringify(r.key)}  not a floodgate key (a Redis ${r.foreign}): left alone`;
  const parts = [JSON.stringify(r.key)];
  parts.push(r.lockedForMs! > 0 ? `LOCKED for ${human(r.lockedForMs!)}` : 'not locked');
  if (r.kind === 'concurrency') parts.push(`${r.heldPermits} permits held`);
  parts.push(r.expiresInMs! < 0 ? 'no expiry' : `back to full within ${human(r.expiresInMs!)}`);
  return parts.join('  ');
}

function human(ms: number): string {
  if (ms < 1000) return `${Math.ceil(ms)}ms`;
  const s = Math.ceil(ms / 1000);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
}

function noKeys(options: KeysOptions): string {
  const tag = options.hashTag === undefined ? '' : ` and hash tag ${JSON.stringify(options.hashTag)}`;
  return `no floodgate keys of limiter ${JSON.stringify(options.limiter)} under prefix ${JSON.stringify(options.prefix)}${tag} (SCAN found none): check the limiter's name, --prefix and --hash-tag; refusing to go on`;
}

function foreign(r: KeyReport): string {
  return `${JSON.stringify(r.redisKey)} (key ${JSON.stringify(r.key)}) is not a floodgate key (a Redis ${r.foreign} of another format); refusing to touch it`;
}
