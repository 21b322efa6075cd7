/**
 * The parity suite (`conformance.test.ts`: every call to memory and Redis, every lease field equal) on a real
 * 3-master Cluster through valkey-glide's `GlideClusterClient`: its limiters spread over the masters, each chain's
 * members in one slot by a shared hash tag.
 */
process.env.FLOODGATE_TEST_GLIDE_CLUSTER = '1';
await import('./conformance.test.ts');
