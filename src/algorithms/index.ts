export type { Algorithm, RemoteEncoding } from './algorithm.ts';
export { Concurrency } from './concurrency.ts';
export { FixedWindow } from './fixed-window.ts';
export { SlidingWindow } from './sliding-window.ts';
export { type Replenishment, TokenBucket } from './token-bucket.ts';
