export * from './rate-limiting/index.ts';
export * from './timeouts/index.ts';
