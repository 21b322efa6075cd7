/** The clients floodgate supports, for a test server, behind one shape, so tests run on each of them. */
import { GlideClient, Logger } from '@valkey/valkey-glide';
import { Redis } from 'ioredis';
import { Redis as Valkey } from 'iovalkey';
import { createClient } from 'redis';
import type { RedisClientLike } from '../../src/redis/index.ts';

export interface TestClient {
  client: RedisClientLike;
  /** Runs a raw command (for SCRIPT FLUSH, KEYS…). */
  command(...args: string[]): Promise<unknown>;
  close(): Promise<void>;
}

// valkey-glide logs every error reply to the console: the tests observe errors through the store.
Logger.setLoggerConfig('off');

/** A user other than `default` (an ACL test's). */
export interface User {
  username: string;
  password: string;
}

export const clients: Record<string, (port: number, user?: User) => Promise<TestClient>> = {
  ioredis: async (port, user) => {
    const client = new Redis({ port, maxRetriesPerRequest: null, ...user });
    client.on('error', () => {}); // reconnects on its own; decisions have their own deadline
    return {
      client,
      command: (name, ...args) => client.call(name, ...args),
      close: async () => client.disconnect(),
    };
  },
  // The ioredis fork: the same API, the same adapter.
  iovalkey: async (port, user) => {
    const client = new Valkey({ port, maxRetriesPerRequest: null, ...user });
    client.on('error', () => {});
    return {
      client,
      command: (name, ...args) => client.call(name, ...args),
      close: async () => client.disconnect(),
    };
  },
  'node-redis': async (port, user) => {
    const client = createClient({ socket: { port, reconnectStrategy: () => 50 }, ...user });
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
  'valkey-glide': async (port, user) => {
    const client = await GlideClient.createClient({
      addresses: [{ host: '127.0.0.1', port }],
      credentials: user,
    });
    return {
      client,
      command: (...args) => client.customCommand(args),
      close: async () => client.close(),
    };
  },
};
