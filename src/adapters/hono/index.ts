export * from './timeouts.ts';
