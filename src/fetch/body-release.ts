import type { Lease } from '../limiters/lease.ts';

// A response dropped without reading or cancelling its body would hold its permit forever: as a safety net,
// the permit comes back when the body stream is garbage-collected. Do not rely on it (GC timing is unknown).
const abandoned = new FinalizationRegistry<Lease>((lease) => lease.release());

/**
 * The same response, with a body that releases `lease` once it has been read to the end, cancelled, or has
 * failed: a concurrency permit covers the whole exchange, not just the headers. A response without a body
 * releases at once. `url`, `redirected` and `type` are copied over, since a constructed Response has none.
 */
export function releaseOnBody(response: Response, lease: Lease): Response {
  const body = response.body;
  if (body === null) {
    lease.release();
    return response;
  }
  const reader = body.getReader();
  let released = false;
  const finish = () => {
    if (released) return;
    released = true;
    abandoned.unregister(stream);
    lease.release();
  };
  const stream: ReadableStream<Uint8Array> = new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        try {
          const chunk = await reader.read();
          if (chunk.done) {
            finish();
            controller.close();
          } else controller.enqueue(chunk.value);
        } catch (error) {
          finish();
          controller.error(error);
        }
      },
      cancel(reason) {
        finish();
        return reader.cancel(reason);
      },
    },
    // Pull only when the caller reads: an unread body keeps its permit.
    { highWaterMark: 0 },
  );
  abandoned.register(stream, lease, stream);
  const wrapped = new Response(stream, {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  });
  Object.defineProperties(wrapped, {
    url: { value: response.url },
    redirected: { value: response.redirected },
    type: { value: response.type },
  });
  return wrapped;
}
