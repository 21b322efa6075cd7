export * from './timeouts.ts';
export * from './rate-limiting.ts';
