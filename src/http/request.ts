/** What floodgate needs of an incoming request, whatever the framework. */
export interface HttpRequest {
  /** The socket peer address as Node reports it (may be an IPv4-mapped IPv6 address, may be undefined after a disconnect). */
  readonly remoteAddress: string | undefined;
  /** A header by lower-case name. */
  header(name: string): string | string[] | undefined;
  readonly method: string;
  /** The URL path, without the query. */
  readonly path: string;
}
