import { keySlot } from './slot.ts';

/** A connection to one node of an ioredis (or iovalkey) Cluster, as `cluster.nodes('master')` lists them. */
interface NodeConnection {
  status?: string;
  options?: { host?: string; port?: number };
}

/**
 * Sends a call over several keys of an ioredis (or iovalkey) Cluster straight to its slot's master, so that a
 * `TRYAGAIN` comes back at once. Through the Cluster client, ioredis retries a `TRYAGAIN` itself up to
 * `maxRedirections` (16) times, every `retryDelayOnTryAgain` (100 ms by default; with 0, a timer and a round trip
 * each): on a loaded machine that took 150–220 ms, so the store learnt that a slot was being migrated only after
 * the deadline of the batch (and its decisions answered by `onUnavailable`), and had no time left to split it.
 *
 * A call over one key, and any call whose node this cannot name (its connection not ready, an address the
 * Cluster maps with `natMap`), goes through the Cluster client as before. A `MOVED` or `ASK` from the node (the
 * slot map is stale, or every key named is on the importing node) means the call did not run: it is sent
 * through the Cluster client, which follows the redirection.
 */
export function slotOwner<C>(cluster: {
  slots: (string[] | undefined)[];
  nodes(role: 'master'): C[];
}): (numKeys: number, keysAndArgs: readonly string[]) => C | undefined {
  // The master connections by 'host:port', rebuilt when the slot map names one it does not hold (or not ready).
  let byAddress = new Map<string, C>();
  const ready = (node: C | undefined) =>
    (node as NodeConnection | undefined)?.status === 'ready' ? node : undefined;
  return (numKeys, keysAndArgs) => {
    if (numKeys < 2) return undefined;
    const address = cluster.slots[keySlot(keysAndArgs[0])]?.[0];
    if (address === undefined) return undefined;
    const known = ready(byAddress.get(address));
    if (known !== undefined) return known;
    byAddress = new Map();
    for (const node of cluster.nodes('master')) {
      const { options } = node as NodeConnection;
      byAddress.set(`${options?.host}:${options?.port}`, node);
    }
    return ready(byAddress.get(address));
  };
}

/** The node's reply was a redirection: the call did not run there, and the Cluster client should send it. */
export function redirected(error: unknown): boolean {
  const text = error instanceof Error ? error.message : '';
  return text.startsWith('MOVED ') || text.startsWith('ASK ');
}
