export * from './rate-limiting.ts';
export * from './timeouts.ts';
