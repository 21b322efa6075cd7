/**
 * floodgate/nestjs on GraphQL resolvers over real sockets: Nest 11 on Express with @nestjs/graphql's Apollo
 * driver, floodgate's guard as APP_GUARD with no subclass. A resolver limited per user (req.user set by an auth
 * guard from the GraphQL context's request); the rejection as GraphQL expects it (HTTP 200, an error in `errors`
 * with extensions.code RATE_LIMITED and retryAfter, the other fields answered) with the fields on the HTTP
 * response; each root field decided once whatever guards apply; nested fields not counted; @RateLimit and
 * @NoRateLimit on resolvers; HTTP controllers in the same app unchanged.
 */
import 'reflect-metadata';
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ApolloDriver, type ApolloDriverConfig } from '@nestjs/apollo';
import { type ExecutionContext, Injectable, Module, UseGuards } from '@nestjs/common';
import { APP_GUARD, NestFactory } from '@nestjs/core';
import { GraphQLModule, Parent, Query, ResolveField, Resolver } from '@nestjs/graphql';
import {
  clientIp,
  FloodgateGuard,
  FloodgateModule,
  type FloodgateModuleOptions,
  NoRateLimit,
  RATE_LIMITED_CODE,
  RateLimit,
  requestOf,
} from '../../src/adapters/nestjs/index.ts';
import { concurrency, fixedWindow, partitioned } from '../../src/index.ts';
import { clock, gate, get, until } from '../koa/app.ts';
import { controller } from './app.ts';

const typeDefs = /* GraphQL */ `
  type Profile {
    name: String
  }
  type Query {
    hello: String
    login: String
    open: String
    slow: String
    me: Profile
  }
`;

type Request = { headers: Record<string, string | string[] | undefined>; user?: { id: string } };

type MethodDecorator = (target: object, key: string, descriptor: PropertyDescriptor) => unknown;
/** Applies Nest's method decorators as calls (the project compiles without decorator syntax). */
function decorate(Cls: { prototype: object }, name: string, ...decorators: MethodDecorator[]): void {
  const descriptor = Object.getOwnPropertyDescriptor(Cls.prototype, name)!;
  for (const d of decorators) d(Cls.prototype, name, descriptor);
}

/** Sets req.user from the x-user header, for controllers and resolvers: what a Passport guard does. */
class Auth {
  canActivate(context: ExecutionContext): boolean {
    const request = requestOf<Request>(context);
    const user = request?.headers['x-user'];
    if (request !== undefined && typeof user === 'string') request.user = { id: user };
    return true;
  }
}
Injectable()(Auth);

interface Served {
  url: string;
  close(): Promise<void>;
}

async function start(
  options: FloodgateModuleOptions,
  resolvers: unknown[],
  extra: unknown[] = [],
): Promise<Served> {
  const App = class AppModule {};
  Module({
    imports: [
      FloodgateModule.forRoot(options),
      GraphQLModule.forRoot<ApolloDriverConfig>({
        driver: ApolloDriver,
        typeDefs,
        playground: false,
        // Guards on @ResolveField too: nested fields must still not be counted.
        fieldResolverEnhancers: ['guards'],
      }),
    ],
    controllers: extra as never[],
    providers: [
      ...(resolvers as never[]),
      { provide: APP_GUARD, useClass: Auth },
      { provide: APP_GUARD, useClass: FloodgateGuard },
    ],
  })(App);
  const app = await NestFactory.create(App, { logger: false });
  await app.listen(0, '127.0.0.1');
  const url = (await app.getUrl()).replace('[::1]', '127.0.0.1');
  return { url, close: () => app.close() };
}

interface GraphQLAnswer {
  status: number;
  headers: Headers;
  body: {
    data?: Record<string, unknown> | null;
    errors?: Array<{ message: string; path?: string[]; extensions?: Record<string, unknown> }>;
  };
}

async function query(url: string, source: string, user?: string): Promise<GraphQLAnswer> {
  const response = await fetch(`${url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(user === undefined ? {} : { 'x-user': user }) },
    body: JSON.stringify({ query: source }),
  });
  return {
    status: response.status,
    headers: response.headers,
    body: (await response.json()) as GraphQLAnswer['body'],
  };
}

const perUser = (limit: number, c: ReturnType<typeof clock>) => {
  const ip = clientIp();
  return partitioned({
    key: (context: ExecutionContext) => {
      const user = requestOf<Request>(context)?.user;
      return user ? `user:${user.id}` : ip(context);
    },
    limiter: fixedWindow({ permitLimit: limit, window: '10s', clock: c }),
  });
};

describe('Nest rateLimiting on GraphQL resolvers (Apollo driver, Express platform)', () => {
  test('per user, from the GraphQL context; the rejection is an error in `errors` with code and retryAfter', async () => {
    const c = clock();
    let calls = 0;
    class Hello {
      hello() {
        calls++;
        return 'world';
      }
    }
    Resolver()(Hello);
    decorate(Hello, 'hello', Query() as MethodDecorator);
    const served = await start({ global: perUser(2, c) }, [Hello]);
    try {
      for (let i = 0; i < 2; i++) {
        const ok = await query(served.url, '{ hello }', 'alice');
        assert.deepEqual(ok.body, { data: { hello: 'world' } });
        assert.match(ok.headers.get('ratelimit')!, /"global";r=\d;t=10/);
      }
      c.t = 4_000;
      const limited = await query(served.url, '{ hello }', 'alice');
      assert.equal(limited.status, 200, 'GraphQL over HTTP answers 200 with the error in `errors`');
      assert.deepEqual(limited.body.data, { hello: null });
      assert.equal(limited.body.errors?.length, 1);
      const [error] = limited.body.errors!;
      assert.equal(error.message, 'Too many requests. Try again in 6 seconds.');
      assert.deepEqual(error.path, ['hello']);
      assert.equal(error.extensions?.code, RATE_LIMITED_CODE);
      assert.equal(error.extensions?.retryAfter, 6);
      assert.equal(limited.headers.get('retry-after'), '6');
      assert.match(limited.headers.get('ratelimit')!, /"global";r=0;t=6/);
      assert.equal(calls, 2, 'the rejected resolver did not run');
      assert.deepEqual((await query(served.url, '{ hello }', 'bob')).body, { data: { hello: 'world' } });
    } finally {
      await served.close();
    }
  });

  test('each root field is one decision, decided once under two guards; nested fields are not counted', async () => {
    const c = clock();
    const global = fixedWindow({ permitLimit: 10, window: '10s', clock: c });
    class Api {
      hello() {
        return 'world';
      }
      me() {
        return { first: 'Ada' };
      }
    }
    Resolver()(Api);
    UseGuards(FloodgateGuard)(Api);
    decorate(Api, 'hello', Query() as MethodDecorator);
    decorate(Api, 'me', Query() as MethodDecorator);
    class ProfileFields {
      name(profile: { first: string }) {
        return profile.first;
      }
    }
    Resolver('Profile')(ProfileFields);
    decorate(ProfileFields, 'name', ResolveField() as MethodDecorator);
    Parent()(ProfileFields.prototype, 'name', 0);
    const served = await start({ global }, [Api, ProfileFields]);
    try {
      const both = await query(served.url, '{ a: hello b: hello me { name } }');
      assert.deepEqual(both.body, { data: { a: 'world', b: 'world', me: { name: 'Ada' } } });
      assert.equal(global.statistics().available, 7, 'three root fields, two guards each: three permits');
    } finally {
      await served.close();
    }
  });

  test('@RateLimit and @NoRateLimit on resolvers; a rejected field leaves the others answered', async () => {
    const c = clock();
    const global = fixedWindow({ permitLimit: 100, window: '10s', clock: c });
    const login = fixedWindow({ permitLimit: 1, window: '10s', clock: c });
    class Api {
      login() {
        return 'in';
      }
      open() {
        return 'open';
      }
      hello() {
        return 'world';
      }
    }
    Resolver()(Api);
    decorate(Api, 'login', Query() as MethodDecorator, RateLimit('login') as MethodDecorator);
    decorate(Api, 'open', Query() as MethodDecorator, NoRateLimit() as MethodDecorator);
    decorate(Api, 'hello', Query() as MethodDecorator);
    const Http = controller({ '/': [() => 'home'] });
    const served = await start({ global, policies: { login } }, [Api], [Http]);
    try {
      assert.deepEqual((await query(served.url, '{ login }')).body, { data: { login: 'in' } });
      const second = await query(served.url, '{ login hello open }');
      assert.deepEqual(second.body.data, { login: null, hello: 'world', open: 'open' });
      assert.equal(second.body.errors?.length, 1);
      assert.deepEqual(second.body.errors![0].path, ['login']);
      assert.equal(second.body.errors![0].extensions?.code, RATE_LIMITED_CODE);
      assert.equal(second.body.errors![0].extensions?.policy, 'login');
      assert.equal(
        global.statistics().available,
        100 - 2,
        'login once, hello once; the rejection burned nothing',
      );
      const home = await get(served.url);
      assert.deepEqual([home.status, home.body], [200, 'home']);
      assert.equal(global.statistics().available, 100 - 3, 'HTTP handlers as before');
    } finally {
      await served.close();
    }
  });

  test('a concurrency permit is held until the HTTP response of the operation is written', async () => {
    const slots = concurrency({ permitLimit: 1, queueLimit: 0 });
    const holder = gate();
    let entered = 0;
    class Api {
      async slow() {
        entered++;
        await holder.promise;
        return 'done';
      }
    }
    Resolver()(Api);
    decorate(Api, 'slow', Query() as MethodDecorator);
    const served = await start({ global: slots }, [Api]);
    try {
      const first = query(served.url, '{ slow }');
      await until(() => entered === 1, 'the first operation to hold the permit');
      const refused = await query(served.url, '{ slow }');
      assert.equal(refused.body.errors?.[0].extensions?.code, RATE_LIMITED_CODE);
      holder.open();
      assert.deepEqual((await first).body, { data: { slow: 'done' } });
      await until(() => slots.statistics().available === 1, 'the permit to come back');
      assert.deepEqual((await query(served.url, '{ slow }')).body, { data: { slow: 'done' } });
    } finally {
      await served.close();
    }
  });
});
