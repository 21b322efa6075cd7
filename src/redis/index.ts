export { RedisChainLimiter, type RedisChainResource } from './chain.ts';
export type { GlideLike, IoRedisLike, NodeRedisLike, RedisClientLike } from './client.ts';
export {
  isUnavailableAnswer,
  RedisLimiter,
  type RedisLimiterOptions,
  RedisPartitionedLimiter,
  type RedisPartitionedOptions,
} from './limiters.ts';
export type { RedisStoreOptions, UnavailablePolicy } from './options.ts';
export { StoreUnavailableError } from './request.ts';
export { RedisStore, redisStore } from './store.ts';
