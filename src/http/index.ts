export * from './timeouts/index.ts';
export * from './rate-limiting/index.ts';
