/** ioredis and node-redis clients for a test server, behind one shape, so tests run on both. */
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import type { RedisClientLike } from '../../src/redis/index.ts';

export interface TestClient {
  client: RedisClientLike;
  /** Runs a raw command (for SCRIPT FLUSH, KEYS…). */
  command(...args: string[]): Promise<unknown>;
  close(): Promise<void>;
}

export const clients: Record<string, (port: number) => Promise<TestClient>> = {
  ioredis: async (port) => {
    const client = new Redis({ port, maxRetriesPerRequest: null });
    client.on('error', () => {}); // reconnects on its own; decisions have their own deadline
    return {
      client,
      command: (name, ...args) => client.call(name, ...args),
      close: async () => client.disconnect(),
    };
  },
  'node-redis': async (port) => {
    const client = createClient({ socket: { port, reconnectStrategy: () => 50 } });
    client.on('error', () => {});
    await client.connect();
    return {
      client: client as unknown as RedisClientLike,
      command: (...args) => client.sendCommand(args),
      close: async () => {
        client.destroy();
      },
    };
  },
};
