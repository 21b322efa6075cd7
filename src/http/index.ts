export * from './timeouts/index.ts';
