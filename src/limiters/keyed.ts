/**
 * A resource whose partition keys were computed already, once, by the caller (the HTTP layer, which awaits
 * async key functions and runs each exactly once per request): a partitioned limiter given one reads its key
 * here instead of calling its key function again. Not exported by any entry point; its declaration ships because
 * the HTTP layer's types name it (so it is not marked internal: stripInternal would leave those names dangling).
 */
export class KeyedResource {
  constructor(
    /** The limiters the keys belong to, in order. */
    readonly limiters: readonly object[],
    /** Each limiter's key (undefined for a limiter that is not partitioned). */
    readonly keys: readonly (string | undefined)[],
  ) {}
}

/** The partition key of `resource` for `limiter`: computed already when the resource is a {@link KeyedResource}. */
export function keyFor<R>(limiter: { readonly keyOf: (resource: R) => unknown }, resource: R): string {
  if (resource instanceof KeyedResource) {
    const index = resource.limiters.indexOf(limiter);
    if (index >= 0) return resource.keys[index] as string;
  }
  return limiter.keyOf(resource) as string;
}
