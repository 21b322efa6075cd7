import { Client } from 'undici';

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  /** Set when the body did not complete (the connection was closed under it) or the request was aborted. */
  error?: Error;
  /** Milliseconds from sending the request until the body ended or failed. */
  ms: number;
}

/** One keep-alive connection, so that bytes a late handler leaked would corrupt the next answer on it. */
export function connect(url: string): Client {
  return new Client(url, { pipelining: 1, keepAliveTimeout: 30_000 });
}

export async function get(client: Client, path: string, abortAfterMs?: number): Promise<Answer> {
  const start = performance.now();
  const signal = abortAfterMs === undefined ? undefined : AbortSignal.timeout(abortAfterMs);
  let status = 0;
  let headers: Answer['headers'] = {};
  let body = '';
  try {
    const res = await client.request({ path, method: 'GET', signal });
    status = res.statusCode;
    headers = res.headers;
    for await (const chunk of res.body) body += chunk.toString();
    return { status, headers, body, ms: performance.now() - start };
  } catch (error) {
    return { status, headers, body, error: error as Error, ms: performance.now() - start };
  }
}
