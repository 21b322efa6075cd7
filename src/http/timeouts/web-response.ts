import type { TimeoutPolicy } from './policy.ts';

/** The policy's answer as a web `Response` (a fresh one each time: a body can be read only once). */
export function policyResponse(policy: TimeoutPolicy): Response {
  const headers = new Headers();
  for (const [name, value] of policy.headers) headers.append(name, value);
  return new Response(policy.body.length > 0 ? Uint8Array.from(policy.body) : null, {
    status: policy.status,
    statusText: policy.statusMessage,
    headers,
  });
}
