/**
 * A minimal request for key functions outside a framework (a custom server, a test): the socket peer and the
 * headers. Adapters never build one; they hand hooks the framework's own object.
 */
export interface HttpRequest {
  /** The socket peer address as Node reports it (may be an IPv4-mapped IPv6 address, may be undefined after a disconnect). */
  readonly remoteAddress: string | undefined;
  /** A header by lower-case name. */
  header(name: string): string | string[] | undefined;
  readonly method: string;
  /** The URL path, without the query. */
  readonly path: string;
}

/** The node side of a request: `IncomingMessage`, Express's `Request`, or the `raw` of a Fastify request. */
export interface NodeRequestLike {
  readonly headers: Record<string, string | string[] | undefined>;
  readonly rawHeaders?: readonly string[];
  readonly socket?: { readonly remoteAddress?: string } | null;
}

/** What a Hono `Context` offers: the web request, and the node request under `@hono/node-server`. */
export interface HonoContextLike {
  readonly req: { readonly raw: Request };
  readonly env?: unknown;
}

/**
 * What a Koa `ctx` (or `ctx.request`) offers: the node request as `req`, the app with its `proxy` setting, and
 * `ip`, Koa's reading of the forwarded header under `app.proxy`.
 */
export interface KoaContextLike {
  readonly req: NodeRequestLike;
  readonly app: { readonly proxy?: boolean; readonly maxIpsCount?: number };
  readonly ip: string;
}

/**
 * Every request shape floodgate's helpers (`clientIp()`, `headerValue()`, `validatedKey()`) read: node's
 * `IncomingMessage`, Express's `Request`, Fastify's `FastifyRequest`, Hono's `Context`, Koa's `ctx`, a web `Request`, or an
 * {@link HttpRequest}. One helper serves every adapter: each passes its own object.
 */
export type RequestLike = NodeRequestLike | HonoContextLike | KoaContextLike | Request | HttpRequest;

/** Which of the shapes a request is: read once per call, cheaply (a few property loads). */
export const Shape = { Node: 0, Fastify: 1, Hono: 2, Web: 3, View: 4, Koa: 5, Unknown: 6 } as const;
export type Shape = (typeof Shape)[keyof typeof Shape];

type Loose = {
  headers?: unknown;
  socket?: unknown;
  raw?: NodeRequestLike;
  req?: { raw?: Request; socket?: unknown };
  header?: unknown;
  env?: { incoming?: NodeRequestLike };
};

/**
 * The shape of `req`. Node's `headers` is built lazily from the raw headers on first read, so the socket and the
 * properties only other shapes have are looked at first: a key by address reads no header.
 */
export function shapeOf(req: unknown): Shape {
  const r = req as Loose;
  // A Fastify request has the node request as `raw`; node's and Express's have none.
  const raw = r.raw as { socket?: unknown } | undefined;
  if (raw !== undefined && raw !== null && typeof raw === 'object' && raw.socket !== undefined)
    return Shape.Fastify;
  if (r.socket !== undefined) {
    // Koa's ctx and ctx.request delegate `socket` to the node request they hold as `req`.
    const inner = r.req;
    return typeof inner === 'object' && inner !== null && inner.socket !== undefined ? Shape.Koa : Shape.Node;
  }
  if (typeof r.req === 'object' && r.req !== null && r.req.raw !== undefined) return Shape.Hono;
  const headers = r.headers as { get?: unknown } | undefined;
  if (typeof headers === 'object' && headers !== null) {
    return typeof headers.get === 'function' ? Shape.Web : Shape.Node;
  }
  if (typeof r.header === 'function') return Shape.View;
  return Shape.Unknown;
}

/** The node request behind `req`, when there is one (under `@hono/node-server` for Hono). */
export function nodeRequestOf(req: unknown, shape: Shape = shapeOf(req)): NodeRequestLike | undefined {
  switch (shape) {
    case Shape.Node:
      return req as NodeRequestLike;
    case Shape.Fastify:
      return (req as Loose).raw;
    case Shape.Koa:
      return (req as KoaContextLike).req;
    case Shape.Hono: {
      const incoming = (req as Loose).env?.incoming;
      // Not `headers`: node builds that object on first read, and node-server itself reads the raw headers.
      return incoming?.socket !== undefined ? incoming : undefined;
    }
    default:
      return undefined;
  }
}

/**
 * The socket peer address of `req`, as the runtime reports it; undefined when unknown. Hono off Node: Bun's
 * `server.requestIP(request)` (Bun passes the server as `c.env`), Deno's `info.remoteAddr` (`Deno.serve` passes
 * the handler info as `c.env`) — what Hono's own `getConnInfo` reads on those runtimes.
 */
export function peerAddress(req: unknown, shape: Shape = shapeOf(req)): string | undefined {
  if (shape === Shape.View) return (req as HttpRequest).remoteAddress;
  const node = nodeRequestOf(req, shape);
  if (node !== undefined || shape !== Shape.Hono) return node?.socket?.remoteAddress ?? undefined;
  const env = (req as { env?: RuntimeEnv }).env;
  if (env === undefined || env === null) return undefined;
  if (typeof env.requestIP === 'function') {
    const address = env.requestIP((req as HonoContextLike).req.raw)?.address;
    return typeof address === 'string' ? address : undefined;
  }
  const hostname = env.remoteAddr?.hostname;
  return typeof hostname === 'string' ? hostname : undefined;
}

/** What Bun's server and Deno's handler info offer as Hono's `c.env`. */
interface RuntimeEnv {
  requestIP?: (request: Request) => { address?: unknown } | null | undefined;
  remoteAddr?: { hostname?: unknown };
}

/**
 * A header of `req` by lower-case name: a string, an array when node kept its lines apart (`set-cookie`), or
 * undefined. Lines of one header are joined with `', '` as node and the Fetch API do.
 */
export function headerOf(
  req: unknown,
  name: string,
  shape: Shape = shapeOf(req),
): string | string[] | undefined {
  switch (shape) {
    case Shape.Node:
    case Shape.Fastify:
    case Shape.Koa:
      return nodeRequestOf(req, shape)!.headers[name];
    case Shape.Hono:
      return (req as HonoContextLike).req.raw.headers.get(name) ?? undefined;
    case Shape.Web:
      return (req as Request).headers.get(name) ?? undefined;
    case Shape.View:
      return (req as HttpRequest).header(name);
    default:
      return undefined;
  }
}

/**
 * A header sent on exactly one line, or undefined (missing, or sent on several lines: a client must not choose
 * which of its values counts). Node joins most repeated headers and drops repeats of others (`authorization`),
 * and the Fetch API joins them all, so the lines are counted in node's raw headers where they exist. A web
 * request off Node has no raw headers: there, a repeated header reads as its joined value.
 */
export function singleHeader(req: unknown, name: string, shape: Shape = shapeOf(req)): string | undefined {
  const value = headerOf(req, name, shape);
  if (typeof value !== 'string') return undefined;
  const raw = nodeRequestOf(req, shape)?.rawHeaders;
  if (raw !== undefined) {
    let lines = 0;
    for (let i = 0; i < raw.length; i += 2) {
      const field = raw[i];
      if (field.length === name.length && field.toLowerCase() === name && ++lines > 1) return undefined;
    }
  }
  return value;
}
