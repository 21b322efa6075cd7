import type { FastifyReply } from 'fastify';
import type { Answers } from '../../http/rate-limiting/flow.ts';
import { waitSignal } from '../../http/rate-limiting/node-http.ts';
import type { Answer } from '../../http/rate-limiting/response.ts';

/** How the rate-limiting flow answers on Fastify: through the reply, permits watched on the node response. */

export const replyAnswers: Answers<FastifyReply> = {
  signal: (reply) => waitSignal(reply.raw.req, reply.raw),
  node: (reply) => reply.raw,
  timeout: (reply) => reply.raw.req,
  info: (reply, info) => {
    reply.request.rateLimit = info;
  },
  header: (reply, name, value) => {
    reply.header(name, value);
  },
  sent: (reply) => reply.sent,
  answeredBy: (reply) => reply.sent || reply.raw.destroyed,
  send,
};

// Answer through Fastify rather than on the raw response, so onSend/onResponse hooks and the request log see it.
function send(reply: FastifyReply, answer: Answer): void {
  for (const [name, value] of answer.headers) reply.header(name, value);
  if (answer.headers instanceof Headers && answer.headers.has('set-cookie')) {
    reply.header('set-cookie', answer.headers.getSetCookie());
  }
  // A Buffer, so that Fastify keeps the Content-Type as set (it adds a charset to strings).
  reply.code(answer.status).send(Buffer.from(answer.body));
}
