/**
 * The parity suite (`conformance.test.ts`: every call to memory and Redis, every lease field equal) in lease mode:
 * each Redis limiter that can lease is made with `leases: true` (issue 26). One process on a test clock, so the
 * fleet's remaining is this process's and must be exact.
 */
process.env.FLOODGATE_TEST_LEASES = '1';
await import('./conformance.test.ts');
