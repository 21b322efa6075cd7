import { describe } from '../duration.ts';
import type { Script } from './script.ts';

/**
 * What the store needs from a Redis client: run a script over keys in one round trip, and whether the client
 * talks to a Cluster (then every call's keys must share a slot, and batches are split per slot).
 */
export interface ScriptRunner {
  readonly cluster: boolean;
  run(script: Script, keys: readonly string[], args: readonly string[]): Promise<unknown>;
}

/** The methods of ioredis (`Redis` and `Cluster`, v5 and v6) the adapter uses. */
export interface IoRedisLike {
  evalsha(sha: string, numKeys: number, ...keysAndArgs: string[]): Promise<unknown>;
  eval(script: string, numKeys: number, ...keysAndArgs: string[]): Promise<unknown>;
}

/** The methods of node-redis (`createClient` and `createCluster`, v4 to v6) the adapter uses. */
export interface NodeRedisLike {
  evalSha(sha: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
  eval(script: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
}

/** An ioredis or node-redis client (single node or Cluster). */
export type RedisClientLike = IoRedisLike | NodeRedisLike;

/**
 * Wraps an ioredis or node-redis client. Scripts go by `EVALSHA`; a `NOSCRIPT` answer (a fresh node, a
 * failover, `SCRIPT FLUSH`) is retried once with `EVAL`, which also loads the script on the node that answered,
 * so every node of a Cluster loads it on first use without a separate `SCRIPT LOAD` pass.
 */
export function scriptRunner(client: unknown): ScriptRunner {
  if (client === null || typeof client !== 'object') {
    throw new TypeError(
      `redisStore: client must be an ioredis or node-redis client; got ${describe(client)}`,
    );
  }
  const c = client as Record<string, unknown>;
  if (typeof c.evalsha === 'function' && typeof c.eval === 'function') return ioredis(client as IoRedisLike);
  if (typeof c.evalSha === 'function' && typeof c.eval === 'function') {
    return nodeRedis(client as NodeRedisLike);
  }
  throw new TypeError(
    'redisStore: client must be an ioredis client (new Redis() / new Cluster()) or a node-redis client (createClient() / createCluster()); got an object with neither evalsha nor evalSha',
  );
}

function ioredis(client: IoRedisLike): ScriptRunner {
  // ioredis' Cluster class is named Cluster and has `nodes()`; a plain Redis has neither.
  const cluster =
    (client as { constructor?: { name?: string } }).constructor?.name === 'Cluster' ||
    typeof (client as { nodes?: unknown }).nodes === 'function';
  return {
    cluster,
    async run(script, keys, args) {
      try {
        return await client.evalsha(script.sha, keys.length, ...keys, ...args);
      } catch (error) {
        if (!isNoScript(error)) throw error;
        return client.eval(script.source, keys.length, ...keys, ...args);
      }
    },
  };
}

function nodeRedis(client: NodeRedisLike): ScriptRunner {
  // node-redis' cluster exposes its masters; a single-node client does not.
  const cluster =
    'masters' in (client as object) || typeof (client as { getMasters?: unknown }).getMasters === 'function';
  return {
    cluster,
    async run(script, keys, args) {
      const options = { keys: keys as string[], arguments: args as string[] };
      try {
        return await client.evalSha(script.sha, options);
      } catch (error) {
        if (!isNoScript(error)) throw error;
        return client.eval(script.source, options);
      }
    },
  };
}

function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('NOSCRIPT');
}
