import { describe } from '../duration.ts';
import type { Script } from './script.ts';
import { redirected, slotOwner } from './slot-owner.ts';

/**
 * What the store needs from a Redis client: run the decision code over keys in one round trip, and whether the
 * client talks to a Cluster (then every call's keys must share a slot, and batches are split per slot).
 * `keysAndArgs` is the `numKeys` keys then the arguments, in one array (a batch has hundreds: built once).
 * The reply goes to `onReply`, a failure to `onError`, one of them once: callbacks rather than a promise, so
 * the common call is the client's promise and one reaction, not a chain of them.
 */
export interface ScriptRunner {
  readonly cluster: boolean;
  /**
   * The node serving `slot` as the client's own slot map says now (`host:port`), or undefined when it does not
   * say: a failure is then scoped to the slot alone.
   */
  nodeOf?(slot: number): string | undefined;
  run(
    script: Script,
    numKeys: number,
    keysAndArgs: readonly string[],
    onReply: (reply: unknown) => void,
    onError: (error: unknown) => void,
  ): void;
}

/** The methods of ioredis (`Redis` and `Cluster`, v5 and v6) the adapter uses. */
export interface IoRedisLike {
  evalsha(sha: string, numKeys: number, ...keysAndArgs: string[]): Promise<unknown>;
  eval(script: string, numKeys: number, ...keysAndArgs: string[]): Promise<unknown>;
  /** Any command (`FCALL`, `FUNCTION LOAD`); without it the adapter keeps to scripts. */
  call?(command: string, ...args: string[]): Promise<unknown>;
  /** A Cluster's nodes (to load the Function on every master). */
  nodes?(role: 'master'): { call(command: string, ...args: string[]): Promise<unknown> }[];
}

/** The methods of node-redis (`createClient` and `createCluster`, v4 to v6) the adapter uses. */
export interface NodeRedisLike {
  evalSha(sha: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
  eval(script: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
  /** `FCALL` (node-redis >= 4.1); without it the adapter keeps to scripts. */
  fCall?(name: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
  /** `FUNCTION LOAD` on a single-node client. */
  functionLoad?(code: string, options: { REPLACE: boolean }): Promise<unknown>;
  /** A Cluster's masters and a client for one of them (to load the Function on every master). */
  masters?: unknown[];
  nodeClient?(node: unknown): NodeRedisLike | Promise<NodeRedisLike>;
}

/** The methods of valkey-glide's `GlideClient` (v2, one node) the adapter uses. */
export interface GlideLike {
  /** Any command (`FCALL`, `EVALSHA`, `EVAL`, `FUNCTION LOAD`). */
  customCommand(args: string[], options?: { decoder?: never }): Promise<unknown>;
  fcall(func: string, keys: string[], args: string[]): Promise<unknown>;
}

/**
 * An ioredis or iovalkey client (`new Redis()` / `new Cluster()`) or a node-redis client (`createClient()` /
 * `createCluster()`), single node or Cluster, or a valkey-glide `GlideClient` (single node).
 */
export type RedisClientLike = IoRedisLike | NodeRedisLike | GlideLike;

/** How one client runs the decision code: as a Function, or as a script. */
interface Calls {
  cluster: boolean;
  nodeOf?(slot: number): string | undefined;
  /** `FCALL`, if the client can send it. */
  fcall?(fn: string, numKeys: number, keysAndArgs: readonly string[]): Promise<unknown>;
  /** `FUNCTION LOAD REPLACE` on every node that may run a decision (every master of a Cluster). */
  load?(library: string): Promise<void>;
  evalsha(sha: string, numKeys: number, keysAndArgs: readonly string[]): Promise<unknown>;
  eval(source: string, numKeys: number, keysAndArgs: readonly string[]): Promise<unknown>;
}

/**
 * Wraps an ioredis or node-redis client. Decisions go by `FCALL` to a Redis Function (Redis >= 7): the Lua
 * tables and closures are built once per load, not per call. A node without it (a fresh node, a failover to one
 * that never saw the load, `FUNCTION FLUSH`) answers "Function not found": the library is loaded — on every
 * master of a Cluster — and the call retried. A server that has no Functions (Redis 6) or an ACL that forbids
 * them switches the client to scripts for good: `EVALSHA`, and `EVAL` after `NOSCRIPT`.
 */
export function scriptRunner(client: unknown): ScriptRunner {
  if (client === null || typeof client !== 'object') {
    throw new TypeError(
      `redisStore: client must be an ioredis, iovalkey, node-redis or valkey-glide client; got ${describe(client)}`,
    );
  }
  const c = client as Record<string, unknown>;
  if (typeof c.evalsha === 'function' && typeof c.eval === 'function')
    return runner(ioredis(client as IoRedisLike));
  if (typeof c.evalSha === 'function' && typeof c.eval === 'function') {
    return runner(nodeRedis(client as NodeRedisLike));
  }
  if (typeof c.customCommand === 'function' && typeof c.fcall === 'function') {
    return runner(glide(client as GlideLike));
  }
  throw new TypeError(
    'redisStore: client must be an ioredis or iovalkey client (new Redis() / new Cluster()), a node-redis client (createClient() / createCluster()) or a valkey-glide GlideClient; got an object with neither evalsha, evalSha nor customCommand',
  );
}

function runner(calls: Calls): ScriptRunner {
  let functions = calls.fcall !== undefined && calls.load !== undefined;
  // One load at a time, shared by every call that found the Function missing.
  let loading: Promise<void> | undefined;
  const load = (library: string) => {
    loading ??= calls.load!(library).finally(() => {
      loading = undefined;
    });
    return loading;
  };
  const viaScript = async (script: Script, numKeys: number, keysAndArgs: readonly string[]) => {
    try {
      return await calls.evalsha(script.sha, numKeys, keysAndArgs);
    } catch (error) {
      if (!isNoScript(error)) throw error;
      return calls.eval(script.source, numKeys, keysAndArgs);
    }
  };
  // After a first failure of FCALL: whether to load the library, switch to scripts, or fail.
  const recover = async (error: unknown, script: Script, numKeys: number, keysAndArgs: readonly string[]) => {
    if (noFunctions(error)) {
      functions = false;
      return viaScript(script, numKeys, keysAndArgs);
    }
    if (!isNoFunction(error)) throw error;
    try {
      await load(script.library);
    } catch (loadError) {
      if (!noFunctions(loadError)) throw loadError;
      functions = false;
      return viaScript(script, numKeys, keysAndArgs);
    }
    return calls.fcall!(script.fn, numKeys, keysAndArgs);
  };
  return {
    cluster: calls.cluster,
    nodeOf: calls.nodeOf,
    run(script, numKeys, keysAndArgs, onReply, onError) {
      if (!functions) {
        viaScript(script, numKeys, keysAndArgs).then(onReply, onError);
        return;
      }
      calls.fcall!(script.fn, numKeys, keysAndArgs).then(onReply, (error: unknown) =>
        recover(error, script, numKeys, keysAndArgs).then(onReply, onError),
      );
    },
  };
}

function ioredis(client: IoRedisLike): Calls {
  // ioredis' Cluster class is named Cluster and has `nodes()`; a plain Redis has neither.
  const cluster =
    (client as { constructor?: { name?: string } }).constructor?.name === 'Cluster' ||
    typeof client.nodes === 'function';
  const call = typeof client.call === 'function' ? client.call.bind(client) : undefined;
  // Where the library is loaded: the one server, or every master of a Cluster (FCALL goes to the key's).
  let nodes: (() => Pick<Required<IoRedisLike>, 'call'>[]) | undefined;
  if (!cluster) nodes = () => [client as Required<IoRedisLike>];
  else if (typeof client.nodes === 'function') nodes = () => client.nodes!('master');
  // ioredis' Cluster keeps its slot map as `slots[slot] = ['host:port' of the master, …replicas]`.
  const slots = (client as { slots?: unknown }).slots;
  // A Cluster's calls over several keys go straight to their slot's master (see slot-owner.ts).
  const owner =
    cluster && Array.isArray(slots) && typeof client.nodes === 'function'
      ? slotOwner(
          client as unknown as { slots: (string[] | undefined)[]; nodes(role: 'master'): IoRedisLike[] },
        )
      : undefined;
  // Only then a closure per call: a single node's calls go as before.
  const send =
    owner &&
    ((numKeys: number, keysAndArgs: readonly string[], run: (c: IoRedisLike) => Promise<unknown>) => {
      const node = owner(numKeys, keysAndArgs);
      if (node === undefined) return run(client);
      return run(node).catch((error: unknown) => {
        if (redirected(error)) return run(client);
        throw error;
      });
    });
  return {
    cluster,
    nodeOf: Array.isArray(slots)
      ? (slot) => {
          const node = (client as unknown as { slots: (string[] | undefined)[] }).slots[slot]?.[0];
          return typeof node === 'string' ? node : undefined;
        }
      : undefined,
    // ioredis flattens array arguments itself: no spread of a batch's hundreds of arguments. The name in lower
    // case: iovalkey (0.4) finds a command's keys, so its slot, only then (else it sends it to a random node,
    // redirected from there by MOVED).
    fcall:
      call &&
      ((fn, numKeys, keysAndArgs) =>
        send
          ? send(numKeys, keysAndArgs, (c) => c.call!('fcall', fn, String(numKeys), keysAndArgs as never))
          : call('fcall', fn, String(numKeys), keysAndArgs as never)),
    load:
      call &&
      nodes &&
      (async (library) => {
        await Promise.all(nodes().map((node) => node.call('FUNCTION', 'LOAD', 'REPLACE', library)));
      }),
    evalsha: (sha, numKeys, keysAndArgs) =>
      send
        ? send(numKeys, keysAndArgs, (c) => c.evalsha(sha, numKeys, ...keysAndArgs))
        : client.evalsha(sha, numKeys, ...keysAndArgs),
    eval: (source, numKeys, keysAndArgs) =>
      send
        ? send(numKeys, keysAndArgs, (c) => c.eval(source, numKeys, ...keysAndArgs))
        : client.eval(source, numKeys, ...keysAndArgs),
  };
}

function nodeRedis(client: NodeRedisLike): Calls {
  // node-redis' cluster exposes its masters; a single-node client does not.
  const cluster =
    'masters' in (client as object) || typeof (client as { getMasters?: unknown }).getMasters === 'function';
  const options = (numKeys: number, keysAndArgs: readonly string[]) => ({
    keys: keysAndArgs.slice(0, numKeys),
    arguments: keysAndArgs.slice(numKeys),
  });
  let load: Calls['load'];
  if (!cluster && typeof client.functionLoad === 'function') {
    load = async (library) => {
      await client.functionLoad!(library, { REPLACE: true });
    };
  } else if (cluster && Array.isArray(client.masters) && typeof client.nodeClient === 'function') {
    load = async (library) => {
      await Promise.all(
        client.masters!.map(async (master) => {
          const node = await client.nodeClient!(master);
          await node.functionLoad!(library, { REPLACE: true });
        }),
      );
    };
  }
  const fCall = typeof client.fCall === 'function' ? client.fCall.bind(client) : undefined;
  // node-redis' cluster keeps its slot map as `slots[slot].master.address` ('host:port').
  type Shards = ({ master?: { address?: unknown } } | undefined)[];
  return {
    cluster,
    nodeOf: cluster
      ? (slot) => {
          const address = (client as { slots?: Shards }).slots?.[slot]?.master?.address;
          return typeof address === 'string' ? address : undefined;
        }
      : undefined,
    fcall: fCall && ((fn, numKeys, keysAndArgs) => fCall(fn, options(numKeys, keysAndArgs))),
    load,
    evalsha: (sha, numKeys, keysAndArgs) => client.evalSha(sha, options(numKeys, keysAndArgs)),
    eval: (source, numKeys, keysAndArgs) => client.eval(source, options(numKeys, keysAndArgs)),
  };
}

function glide(client: GlideLike): Calls {
  if (typeof (client as { fcallWithRoute?: unknown }).fcallWithRoute === 'function') {
    // Measured on a slot migrated under load (test/redis/migration.test.ts with this client, 200 ms deadline):
    // 19 427 of 20 740 and 20 758 of 23 220 decisions answered by onUnavailable (0 with the other clients).
    throw new TypeError(
      "redisStore: valkey-glide's GlideClusterClient is not supported: during a slot migration it passes MOVED on to the caller and retries TRYAGAIN until its requestTimeout, so most decisions would be answered by onUnavailable; use a GlideClient (one node), or iovalkey's or ioredis' Cluster",
    );
  }
  // One array per call, as the client wants it (no spread of a batch's hundreds of arguments).
  const command = (head: string[], keysAndArgs: readonly string[]) =>
    client.customCommand(head.concat(keysAndArgs)).then(undefined, fromGlide);
  return {
    cluster: false,
    fcall: (fn, numKeys, keysAndArgs) => command(['FCALL', fn, String(numKeys)], keysAndArgs),
    load: async (library) => {
      await client.customCommand(['FUNCTION', 'LOAD', 'REPLACE', library]).then(undefined, fromGlide);
    },
    evalsha: (sha, numKeys, keysAndArgs) => command(['EVALSHA', sha, String(numKeys)], keysAndArgs),
    eval: (source, numKeys, keysAndArgs) => command(['EVAL', source, String(numKeys)], keysAndArgs),
  };
}

// valkey-glide reports a server's error as "An error was signalled by the server: - <Kind>: <text>", with a kind
// of its own in place of Redis's code: the codes the store tells apart, back in Redis's form.
const GLIDE_ERROR = /^An error was signalled by the server: - (\w+): /;
const GLIDE_CODES: Record<string, string> = {
  ResponseError: 'ERR',
  NoScriptError: 'NOSCRIPT',
  PermissionDenied: 'NOPERM',
  TryAgain: 'TRYAGAIN',
};

function fromGlide(error: unknown): never {
  const match = GLIDE_ERROR.exec(message(error));
  const code = match && GLIDE_CODES[match[1]];
  if (!code) throw error;
  throw new Error(`${code} ${message(error).slice(match[0].length)}`, { cause: error });
}

const message = (error: unknown) => (error instanceof Error ? error.message : '');

function isNoScript(error: unknown): boolean {
  return message(error).startsWith('NOSCRIPT');
}

/** The node does not have the library (yet): load it and retry. */
function isNoFunction(error: unknown): boolean {
  return message(error).startsWith('ERR Function not found');
}

/** The server has no Functions (Redis < 7), or an ACL forbids FCALL / FUNCTION LOAD: use scripts. */
function noFunctions(error: unknown): boolean {
  const text = message(error);
  return /^ERR unknown command/i.test(text) || text.startsWith('NOPERM');
}
