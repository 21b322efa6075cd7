// An ES module entry point: the CommonJS build re-exported, so one implementation serves import and require()
// in a process (docs/architecture.md, Packaging).
export * from '../adapters/fastify/index.ts';
