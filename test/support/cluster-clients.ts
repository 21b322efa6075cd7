import { Cluster, type ClusterOptions } from 'ioredis';
import { Cluster as ValkeyCluster } from 'iovalkey';
import { createCluster } from 'redis';
import type { RedisClientLike } from '../../src/redis/index.ts';

/** Connects a client of one library to the cluster; `close` disconnects it. */
export type ClusterConnect = () => Promise<{ client: RedisClientLike; close(): Promise<void> }>;

/**
 * A connector per client library (ioredis, iovalkey, node-redis) for the cluster `nodes()` names.
 * The nodes are read when connecting, since test files start their cluster in `before`. Errors are the tests'
 * to observe through the store, so the clients' own 'error' events are silenced. `ioredisOptions` go to ioredis
 * and to its fork iovalkey.
 */
export function clusterClients(
  nodes: () => readonly { host: string; port: number }[],
  ioredisOptions: ClusterOptions = {},
): Record<'ioredis' | 'iovalkey' | 'node-redis', ClusterConnect> {
  return {
    ioredis: async () => {
      const client = new Cluster([...nodes()], ioredisOptions);
      client.on('error', () => {});
      return { client, close: async () => client.disconnect() };
    },
    iovalkey: async () => {
      const client = new ValkeyCluster([...nodes()], ioredisOptions as never);
      client.on('error', () => {});
      return { client, close: async () => client.disconnect() };
    },
    'node-redis': async () => {
      const client = createCluster({
        rootNodes: nodes().map((n) => ({ url: `redis://${n.host}:${n.port}` })),
      });
      client.on('error', () => {});
      await client.connect();
      return {
        client: client as unknown as RedisClientLike,
        close: async () => {
          client.destroy();
        },
      };
    },
  };
}
