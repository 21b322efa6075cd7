import type { LimiterSpec } from '../limiters/rate-limiter.ts';
import { Waiting } from './acquire.ts';
import { RedisChainLimiter, type RedisChainResource } from './chain.ts';
import { scriptRunner } from './client.ts';
import { RedisStoreContract } from './contract.ts';
import { Engine } from './engine.ts';
import {
  type Context,
  RedisLimiter,
  type RedisLimiterOptions,
  RedisPartitionedLimiter,
  type RedisPartitionedOptions,
} from './limiters.ts';
import { type RedisStoreOptions, resolveOptions } from './options.ts';

// biome-ignore lint/suspicious/noExplicitAny: a chain accepts partitioned limiters over any resource type
type Member = RedisLimiter | RedisPartitionedLimiter<any>;

/**
 * Limiters whose state lives in Redis, shared by every process that uses the same names. Decisions are the
 * memory store's (the same algorithms, as Lua scripts), one round trip each (a chain included), on Redis's clock.
 */
export class RedisStore {
  private readonly context: Context;

  constructor(options: RedisStoreOptions) {
    const resolved = resolveOptions(options);
    const engine = new Engine(scriptRunner(options.client), resolved);
    const waiting = new Waiting(engine);
    resolved.onRelease = (key) => waiting.wakeKey(key);
    const context = { engine, waiting, prefix: resolved.prefix } as Context;
    context.store = new RedisStoreContract(context);
    this.context = context;
  }

  /** One shared state for `spec` (a `fixedWindow(...)` etc.), under `name`. */
  limiter(spec: LimiterSpec, options: RedisLimiterOptions): RedisLimiter {
    return new RedisLimiter(this.context, spec, options);
  }

  /** One state per key, built from `limiter` (or one spec per key). */
  partitioned<R>(options: RedisPartitionedOptions<R>): RedisPartitionedLimiter<R> {
    return new RedisPartitionedLimiter(this.context, options);
  }

  /** Limiters of this store decided as one, all-or-nothing, in one script call. */
  chain<const M extends readonly Member[]>(...members: M): RedisChainLimiter<RedisChainResource<M>> {
    return new RedisChainLimiter(this.context, members);
  }

  /** Decisions answered by `onUnavailable` so far (also counted in metrics as `store_unavailable`). */
  get unavailable(): number {
    return this.context.engine.unavailable;
  }
}

/**
 * A Redis store. `client` is an ioredis or node-redis client (single node or Cluster), connected.
 *
 * @example
 * const store = redisStore({ client: new Redis(), onUnavailable: 'fail-closed' });
 * const api = store.partitioned({ name: 'api', key: (ip: string) => ip, limiter: fixedWindow({ permitLimit: 100, window: '1m' }) });
 * const lease = await api.tryAcquire(ip);
 */
export function redisStore(options: RedisStoreOptions): RedisStore {
  return new RedisStore(options);
}
