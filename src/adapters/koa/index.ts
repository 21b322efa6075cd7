export * from './client-ip.ts';
export * from './rate-limiting.ts';
export * from './timeouts.ts';
