/**
 * WebSocket gateways (Nest 11, @nestjs/platform-ws) over real sockets: FloodgateGuard as APP_GUARD lets gateway
 * messages through (it limits HTTP requests only), and the recipe of docs/nestjs.md — a guard keyed by
 * `context.switchToWs().getClient()` over a partitioned limiter — limits messages per connection and tells the
 * client when to come back.
 */
import 'reflect-metadata';
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type CanActivate, type ExecutionContext, Injectable, Module, UseGuards } from '@nestjs/common';
import { APP_GUARD, NestFactory } from '@nestjs/core';
import { WsAdapter } from '@nestjs/platform-ws';
import { SubscribeMessage, WebSocketGateway } from '@nestjs/websockets';
import { WebSocket } from 'ws';
import { FloodgateGuard, FloodgateModule } from '../../src/adapters/nestjs/index.ts';
import { fixedWindow, partitioned, tokenBucket } from '../../src/index.ts';
import { clock, get } from '../koa/app.ts';
import { controller } from './app.ts';

type Client = { send(data: string): void };

/** The guard of docs/nestjs.md's recipe: one token bucket per connection. */
function wsGuard(c: ReturnType<typeof clock>) {
  let next = 0;
  const ids = new WeakMap<object, string>();
  const idOf = (client: object) => {
    let id = ids.get(client);
    if (id === undefined) {
      id = String(++next);
      ids.set(client, id);
    }
    return id;
  };
  const messages = partitioned({
    key: idOf,
    limiter: tokenBucket({ tokenLimit: 2, tokensPerPeriod: 1, period: '1s', clock: c }),
  });
  class WsRateLimitGuard implements CanActivate {
    canActivate(context: ExecutionContext): boolean {
      if (context.getType() !== 'ws') return true;
      const client = context.switchToWs().getClient<Client>();
      const lease = messages.tryAcquire(client);
      if (!lease.granted) {
        client.send(JSON.stringify({ event: 'rate-limited', data: { retryAfterMs: lease.retryAfterMs } }));
      }
      return lease.granted;
    }
  }
  Injectable()(WsRateLimitGuard);
  return WsRateLimitGuard;
}

function gateway(guard?: ReturnType<typeof wsGuard>) {
  class Chat {
    chat(_client: Client, data: unknown) {
      return { event: 'chat', data };
    }
  }
  const descriptor = Object.getOwnPropertyDescriptor(Chat.prototype, 'chat')!;
  SubscribeMessage('chat')(Chat.prototype, 'chat', descriptor);
  if (guard !== undefined) UseGuards(guard)(Chat.prototype, 'chat', descriptor);
  WebSocketGateway()(Chat);
  return Chat;
}

async function startWs(metadata: Parameters<typeof Module>[0]) {
  const App = class AppModule {};
  Module(metadata)(App);
  const app = await NestFactory.create(App, { logger: false });
  app.useWebSocketAdapter(new WsAdapter(app));
  await app.listen(0, '127.0.0.1');
  const url = (await app.getUrl()).replace('[::1]', '127.0.0.1');
  return { url, close: () => app.close() };
}

/** A connected client that collects what the server sends; `send` and wait for the next `count` answers. */
async function connect(url: string) {
  const socket = new WebSocket(url.replace('http', 'ws'));
  await new Promise<void>((resolve, reject) => {
    socket.once('open', () => resolve());
    socket.once('error', reject);
  });
  const inbox: Array<{ event: string; data: unknown }> = [];
  const waiters: Array<() => void> = [];
  socket.on('message', (raw) => {
    inbox.push(JSON.parse(String(raw)));
    for (const wake of waiters.splice(0)) wake();
  });
  return {
    async answers(messages: unknown[]): Promise<Array<{ event: string; data: unknown }>> {
      const from = inbox.length;
      for (const data of messages) socket.send(JSON.stringify({ event: 'chat', data }));
      while (inbox.length < from + messages.length) await new Promise<void>((wake) => waiters.push(wake));
      return inbox.slice(from);
    },
    close: () => socket.close(),
  };
}

test('FloodgateGuard as APP_GUARD limits HTTP only: gateway messages pass through it', async () => {
  const app = await startWs({
    imports: [FloodgateModule.forRoot({ global: fixedWindow({ permitLimit: 1, window: '1m' }) })],
    controllers: [controller({ '/': [() => 'ok'] })],
    providers: [gateway(), { provide: APP_GUARD, useClass: FloodgateGuard }],
  });
  try {
    assert.equal((await get(app.url)).status, 200);
    assert.equal((await get(app.url)).status, 429);
    const client = await connect(app.url);
    const answers = await client.answers([1, 2, 3]);
    assert.deepEqual(
      answers.map((a) => a.event),
      ['chat', 'chat', 'chat'],
    );
    client.close();
  } finally {
    await app.close();
  }
});

test("the gateway recipe: a guard keyed by switchToWs().getClient() limits each connection's messages", async () => {
  const c = clock();
  const app = await startWs({ providers: [gateway(wsGuard(c))] });
  try {
    const one = await connect(app.url);
    const two = await connect(app.url);
    // The guard answers a refused message at once; granted ones are answered after their handler: sort.
    const first = (await one.answers(['a', 'b', 'c'])).sort((x, y) =>
      JSON.stringify(x).localeCompare(JSON.stringify(y)),
    );
    assert.deepEqual(first, [
      { event: 'chat', data: 'a' },
      { event: 'chat', data: 'b' },
      { event: 'rate-limited', data: { retryAfterMs: 1000 } },
    ]);
    // Another connection has its own bucket.
    assert.deepEqual(await two.answers(['x']), [{ event: 'chat', data: 'x' }]);
    c.t += 1000; // one token back
    assert.deepEqual(await one.answers(['d']), [{ event: 'chat', data: 'd' }]);
    one.close();
    two.close();
  } finally {
    await app.close();
  }
});
