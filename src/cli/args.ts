import { parseArgs } from 'node:util';
import { describe, parseDuration } from '../duration.ts';
import { unknownMessage } from '../options/known.ts';

/** What `floodgate burst` is asked to do. */
export interface BurstOptions {
  url: string;
  /** Requests to send in all. */
  requests: number;
  /** Requests in flight at once. */
  concurrency: number;
  method: string;
  /** Request headers, in the order given. */
  headers: Array<[name: string, value: string]>;
  body?: string;
  /** Milliseconds each request may take, from sending to the end of the answer, before it counts as failed. */
  timeoutMs: number;
}

/** What `floodgate keys` is asked to do. */
export interface KeysOptions {
  action: 'list' | 'show' | 'reset' | 'lock' | 'unlock';
  /** The limiter's name (`store.partitioned({ name })`). */
  limiter: string;
  /** The partition key (every action but `list`). */
  key: string | undefined;
  /** A Redis URL (`redis://host:port`), or undefined with {@link cluster}. */
  redis: string | undefined;
  /** A Cluster's seed nodes (`host:port`), or undefined with {@link redis}. */
  cluster: string[] | undefined;
  /** The store's key prefix (`redisStore({ prefix })`). */
  prefix: string;
  /** The constant hash tag the limiter's keys carry (`hashTag: () => tag`), else the default layout. */
  hashTag: string | undefined;
  /** How long `lock` locks. */
  durationMs: number | undefined;
  /** Keys per page of `list`. */
  count: number;
  /** Where `list` goes on (the cursor a previous page printed). */
  cursor: string | undefined;
  json: boolean;
}

/** A command line, understood. */
export type Command =
  | { kind: 'usage' }
  | { kind: 'help'; topic?: Topic }
  | { kind: 'version' }
  | { kind: 'tour'; chapters?: number[]; html?: string }
  | { kind: 'burst'; options: BurstOptions }
  | { kind: 'keys'; options: KeysOptions };

/** A command with its own usage. */
export type Topic = 'tour' | 'burst' | 'keys';

/** A command line the CLI cannot run; `topic` names the command whose usage helps. */
export class UsageError extends Error {
  readonly topic: Topic | undefined;
  constructor(message: string, topic?: Topic) {
    super(message);
    this.name = 'UsageError';
    this.topic = topic;
  }
}

export const USAGE = `Usage: floodgate <command> [options]

Commands:
  tour [chapter...] [--html <file>]   live rate-limiting and timeout experiments against local servers
  burst <url> [options]               fire requests at a URL and show what came back
  keys <action> <limiter> [key]       look at and change one limiter's keys in Redis (on call)
  help [command]                      this text, or a command's options

Options:
  -h, --help         show help
  -V, -v, --version  show the version`;

export const TOUR_USAGE = `Usage: floodgate tour [chapter...] [--html <file>]

Replays the classic rate-limiting experiments, then request timeouts, against local servers on free ports
(node:http, the in-memory store, real HTTP requests), and explains each result. Chapters 3, 4 and 9 draw what
was measured as charts on a time axis.

Arguments:
  chapter            chapter numbers to run (default: all)

Options:
  --html <file>      also write the charts to <file>, a self-contained HTML page
  -h, --help         show this help`;

export const BURST_USAGE = `Usage: floodgate burst <url> [options]

Sends requests to <url>, shows progress, then a summary: statuses, latency, a timeline of the statuses (one
cell per request, the first 429 marked) and how the server's rate-limit fields counted down. Understands
RateLimit/RateLimit-Policy (IETF drafts), RateLimit-Limit/-Remaining/-Reset, X-RateLimit-* and Retry-After.
Ctrl-C stops it and prints the report. Exits 1 when no request got an HTTP answer.

Options:
  -n, --requests <n>      requests to send (default 100)
  -c, --concurrency <n>   requests in flight at once (default 10, at most -n)
  -X, --method <method>   request method (default GET, or POST with --data)
  -d, --data <body>       request body
  -H, --header <h>        a request header, 'Name: value' (repeatable)
  -t, --timeout <time>    time each request may take, with its unit: 500ms, 10s (default 10s)
  -h, --help              show this help`;

export const KEYS_USAGE = `Usage: floodgate keys <action> <limiter> [key] (--redis <url> | --cluster <host:port,...>) [options]

Looks at and changes the keys of one Redis partitioned limiter (store.partitioned({ name })), as the person on
call needs: who is limited, and unblocking a customer. Refuses a limiter name with no floodgate keys in Redis
and a prefix that is not in floodgate's key format.

Actions:
  list <limiter>              its keys with their state, a page at a time (SCAN; every master of a Cluster)
  show <limiter> <key>        one key's state
  reset <limiter> <key>       forget the key, as if never seen (a concurrency key keeps its held leases)
  lock <limiter> <key> --for <time>   reject every request for the key until the time is up
  unlock <limiter> <key>      end the key's lock

Options:
  --redis <url>            the Redis server (redis://[user:password@]host:port[/db])
  --cluster <nodes>        a Redis Cluster's seed nodes, host:port separated by commas
  --prefix <prefix>        the store's key prefix (default floodgate:)
  --hash-tag <tag>         the constant hash tag of the limiter's keys (its hashTag option), if it has one
  --for <time>             how long lock locks: 30s, 15m, 2h, or milliseconds
  --count <n>              keys per page of list (default 100)
  --cursor <cursor>        the page of list to show (the cursor the previous page printed)
  --json                   print JSON
  -h, --help               show this help`;

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/** Parses the CLI's arguments (without `node` and the script). Throws {@link UsageError}. */
export function parseCommand(argv: readonly string[], chapterCount: number): Command {
  const [command, ...rest] = argv;
  if (command === undefined) return { kind: 'usage' };
  if (command === '-h' || command === '--help') return { kind: 'help' };
  if (command === '-V' || command === '-v' || command === '--version') return { kind: 'version' };
  if (command === 'help') {
    const [topic, ...extra] = rest;
    if (extra.length > 0) throw new UsageError(`unexpected argument ${describe(extra[0])}`);
    if (topic === undefined) return { kind: 'help' };
    if (topic === 'tour' || topic === 'burst' || topic === 'keys') return { kind: 'help', topic };
    throw new UsageError(unknownMessage('help', 'command', topic, ['tour', 'burst', 'keys', 'help']));
  }
  if (command === 'tour') return parseTour(rest, chapterCount);
  if (command === 'burst') return parseBurst(rest);
  if (command === 'keys') return parseKeys(rest);
  if (command.startsWith('-')) {
    const option = command.split('=', 1)[0];
    if (BURST_OPTIONS.includes(option)) {
      throw new UsageError(`${option} is an option of burst: floodgate burst <url> ${command} …`, 'burst');
    }
    throw new UsageError(unknownMessage('floodgate', 'option', command, ['--help', '--version', '-h', '-v']));
  }
  throw new UsageError(unknownMessage('floodgate', 'command', command, ['tour', 'burst', 'keys', 'help']));
}

const ACTIONS = ['list', 'show', 'reset', 'lock', 'unlock'] as const;

function parseKeys(args: readonly string[]): Command {
  const { values, positionals } = parse('keys', args, {
    redis: { type: 'string' },
    cluster: { type: 'string' },
    prefix: { type: 'string' },
    'hash-tag': { type: 'string' },
    for: { type: 'string' },
    count: { type: 'string' },
    cursor: { type: 'string' },
    json: { type: 'boolean' },
    help: { type: 'boolean', short: 'h' },
  });
  if (values.help === true) return { kind: 'help', topic: 'keys' };
  const fail = (message: string) => new UsageError(`keys: ${message}`, 'keys');
  const [action, limiter, key, ...extra] = positionals;
  if (action === undefined)
    throw fail('which action? floodgate keys <list|show|reset|lock|unlock> <limiter>');
  if (!(ACTIONS as readonly string[]).includes(action)) {
    throw new UsageError(unknownMessage('keys', 'action', action, ACTIONS), 'keys');
  }
  const act = action as KeysOptions['action'];
  if (limiter === undefined)
    throw fail(`which limiter? floodgate keys ${act} <limiter>${act === 'list' ? '' : ' <key>'}`);
  if (/[{}\n]/.test(limiter))
    throw fail(`a limiter's name has no braces or newlines; got ${describe(limiter)}`);
  if (act === 'list' && key !== undefined)
    throw fail(`unexpected argument ${describe(key)} (list takes no key)`);
  if (act !== 'list' && key === undefined)
    throw fail(`${act} needs a key: floodgate keys ${act} ${limiter} <key>`);
  if (extra.length > 0) throw fail(`unexpected argument ${describe(extra[0])}`);
  const redis = values.redis as string | undefined;
  const cluster = values.cluster as string | undefined;
  if (redis === undefined && cluster === undefined)
    throw fail('which Redis? give --redis <url> or --cluster <host:port,...>');
  if (redis !== undefined && cluster !== undefined) throw fail('give --redis or --cluster, not both');
  if (redis !== undefined && !/^rediss?:\/\/./.test(redis)) {
    throw fail(`--redis must be a redis:// or rediss:// URL; got ${describe(redis)}`);
  }
  const nodes = cluster?.split(',').map((n) => n.trim());
  for (const node of nodes ?? []) {
    if (!/^[^\s:]+:\d{1,5}$/.test(node))
      throw fail(`--cluster takes host:port nodes separated by commas; got ${describe(node)}`);
  }
  const prefix = (values.prefix as string | undefined) ?? 'floodgate:';
  if (/[{}*?[\]\\\s]/.test(prefix)) {
    throw fail(
      `--prefix ${describe(prefix)} is not in floodgate's key format (no braces, glob characters or spaces)`,
    );
  }
  const hashTag = values['hash-tag'] as string | undefined;
  if (hashTag !== undefined && (hashTag === '' || /[{}]/.test(hashTag))) {
    throw fail(`--hash-tag must be a non-empty tag without braces; got ${describe(hashTag)}`);
  }
  const lockFor = values.for as string | undefined;
  if (act === 'lock' && lockFor === undefined)
    throw fail(`lock needs --for <time>: floodgate keys lock ${limiter} ${key} --for 15m`);
  if (act !== 'lock' && lockFor !== undefined) throw fail(`--for is for lock, not ${act}`);
  let durationMs: number | undefined;
  if (lockFor !== undefined) {
    try {
      durationMs = parseDuration('--for', /^\d+(\.\d+)?$/.test(lockFor) ? Number(lockFor) : lockFor);
    } catch (error) {
      throw fail((error as Error).message);
    }
    if (durationMs > 1e12)
      throw fail(`--for must be at most 1e12 ms (about 31 years); got ${describe(lockFor)}`);
  }
  if (act !== 'list' && (values.count !== undefined || values.cursor !== undefined)) {
    throw fail(`${values.count !== undefined ? '--count' : '--cursor'} is for list, not ${act}`);
  }
  const cursor = values.cursor as string | undefined;
  if (cursor !== undefined && !/^\d+(:\d+)?$/.test(cursor)) {
    throw fail(`--cursor takes the cursor a previous page printed; got ${describe(cursor)}`);
  }
  let count = 100;
  const countText = values.count as string | undefined;
  if (countText !== undefined) {
    count = /^\d+$/.test(countText) ? Number(countText) : Number.NaN;
    if (!Number.isSafeInteger(count) || count < 1 || count > 10_000) {
      throw fail(`--count must be a whole number from 1 to 10000; got ${describe(countText)}`);
    }
  }
  return {
    kind: 'keys',
    options: {
      action: act,
      limiter,
      key,
      redis,
      cluster: nodes,
      prefix,
      hashTag,
      durationMs,
      count,
      cursor,
      json: values.json === true,
    },
  };
}

const BURST_OPTIONS = [
  '-n',
  '--requests',
  '-c',
  '--concurrency',
  '-X',
  '--method',
  '-d',
  '--data',
  '-H',
  '--header',
  '-t',
  '--timeout',
];

type Spec = Record<string, { type: 'string' | 'boolean'; short?: string; multiple?: boolean }>;

/**
 * `parseArgs` without its strict mode, so that every mistake gets a message of our own: an unknown option
 * with the nearest known one, an option without its value.
 */
function parse(where: Topic, args: readonly string[], options: Spec) {
  const parsed = parseArgs({ args: [...args], options, strict: false, allowPositionals: true, tokens: true });
  const known = Object.entries(options).flatMap(([name, o]) => [
    `--${name}`,
    ...(o.short ? [`-${o.short}`] : []),
  ]);
  for (const token of parsed.tokens) {
    if (token.kind !== 'option') continue;
    const spec = options[token.name];
    if (spec === undefined)
      throw new UsageError(unknownMessage(where, 'option', token.rawName, known), where);
    if (spec.type === 'string' && token.value === undefined) {
      throw new UsageError(`${where}: option ${token.rawName} needs a value`, where);
    }
    if (spec.type === 'boolean' && token.value !== undefined) {
      throw new UsageError(`${where}: option ${token.rawName} takes no value`, where);
    }
  }
  return { values: parsed.values, positionals: parsed.positionals };
}

function parseTour(args: readonly string[], chapterCount: number): Command {
  const { values, positionals } = parse('tour', args, {
    html: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  });
  if (values.help === true) return { kind: 'help', topic: 'tour' };
  const chapters: number[] = [];
  for (const text of positionals) {
    const n = /^\d+$/.test(text) ? Number(text) : Number.NaN;
    if (!Number.isInteger(n)) {
      throw new UsageError(
        `tour: a chapter is a number from 1 to ${chapterCount}; got ${describe(text)}`,
        'tour',
      );
    }
    if (n < 1 || n > chapterCount) {
      throw new UsageError(`tour: no chapter ${n}; the chapters are 1 to ${chapterCount}`, 'tour');
    }
    if (!chapters.includes(n)) chapters.push(n);
  }
  const html = values.html as string | undefined;
  if (html === '') throw new UsageError('tour: --html needs a file name', 'tour');
  return { kind: 'tour', chapters: chapters.length > 0 ? chapters : undefined, html };
}

function parseBurst(args: readonly string[]): Command {
  const { values, positionals } = parse('burst', args, {
    requests: { type: 'string', short: 'n' },
    concurrency: { type: 'string', short: 'c' },
    method: { type: 'string', short: 'X' },
    data: { type: 'string', short: 'd' },
    header: { type: 'string', short: 'H', multiple: true },
    timeout: { type: 'string', short: 't' },
    help: { type: 'boolean', short: 'h' },
  });
  if (values.help === true) return { kind: 'help', topic: 'burst' };
  const [url, ...extra] = positionals;
  if (url === undefined) throw new UsageError('burst: which URL? floodgate burst <url>', 'burst');
  if (extra.length > 0) throw new UsageError(`burst: unexpected argument ${describe(extra[0])}`, 'burst');
  let parsed: URL | undefined;
  try {
    parsed = new URL(url);
  } catch {}
  if (parsed === undefined || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')) {
    throw new UsageError(
      `burst: ${describe(url)} is not an http:// or https:// URL (such as http://localhost:3000/)`,
      'burst',
    );
  }
  const body = values.data as string | undefined;
  const method = (values.method as string | undefined) ?? (body === undefined ? 'GET' : 'POST');
  if (!TOKEN.test(method)) {
    throw new UsageError(
      `burst: --method must be an HTTP method such as GET or POST; got ${describe(method)}`,
      'burst',
    );
  }
  return {
    kind: 'burst',
    options: {
      url: parsed.href,
      requests: count('--requests', values.requests as string | undefined, 100),
      concurrency: count('--concurrency', values.concurrency as string | undefined, 10),
      method,
      headers: ((values.header as string[] | undefined) ?? []).map(header),
      body,
      timeoutMs: timeout(values.timeout as string | undefined),
    },
  };
}

/** A whole number of at least 1. */
function count(option: string, text: string | undefined, fallback: number): number {
  if (text === undefined) return fallback;
  const n = /^\d+$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < 1) {
    throw new UsageError(
      `burst: ${option} must be a whole number of at least 1; got ${describe(text)}`,
      'burst',
    );
  }
  return n;
}

/**
 * A duration with its unit. A bare number is refused: autocannon's `-t 5` is seconds, curl's `-m 5` too, and
 * floodgate's options take milliseconds — whichever was meant, the other reading is a thousandfold off.
 */
function timeout(text: string | undefined): number {
  if (text === undefined) return 10_000;
  if (/^\d+(\.\d+)?$/.test(text)) {
    throw new UsageError(
      `burst: --timeout needs a unit: ${text}s or ${text}ms; got ${describe(text)}`,
      'burst',
    );
  }
  try {
    return parseDuration('--timeout', text);
  } catch (error) {
    throw new UsageError(`burst: ${(error as Error).message}`, 'burst');
  }
}

/** `Name: value`, with a valid field name and no line breaks in the value. */
function header(text: string): [string, string] {
  const colon = text.indexOf(':');
  if (colon < 0) {
    throw new UsageError(`burst: a header is 'Name: value', with a colon; got ${describe(text)}`, 'burst');
  }
  const name = text.slice(0, colon).trim();
  const value = text.slice(colon + 1).trim();
  if (!TOKEN.test(name)) {
    throw new UsageError(
      `burst: ${describe(name)} is not a valid header name (in ${describe(text)})`,
      'burst',
    );
  }
  if (/[\r\n\0]/.test(value)) {
    throw new UsageError(`burst: the value of header ${name} holds a line break or a NUL`, 'burst');
  }
  return [name, value];
}
