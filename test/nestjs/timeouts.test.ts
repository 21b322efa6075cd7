/**
 * floodgate/nestjs request timeouts over real sockets on the Express and Fastify platforms: the interceptor
 * answers at the deadline for a handler that ignores its signal (its late result and late errors are dropped),
 * @Timeout durations and policies, @NoTimeout, @TimeoutSignal, a typo failing the start.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { BadRequestException, type ModuleMetadata } from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import {
  FloodgateTimeoutInterceptor,
  FloodgateTimeoutsModule,
  NoTimeout,
  Timeout,
  TimeoutSignal,
} from '../../src/adapters/nestjs/index.ts';
import { gate, get } from '../koa/app.ts';
import { controller, platforms, start as startOn, using } from './app.ts';

const interceptor = { provide: APP_INTERCEPTOR, useClass: FloodgateTimeoutInterceptor };
// The handler's first parameter is the request's signal.
const signalParam = (target: object, key: string) => TimeoutSignal()(target, key, 0);

for (const platform of platforms) {
  describe(`Nest request timeouts (${platform} platform)`, () => {
    const start = (metadata: ModuleMetadata) => startOn(platform, metadata);

    test('answers at the deadline for a handler that ignores its signal; the late result is dropped', async () => {
      const release = gate();
      const seen: { aborted?: boolean; returned?: boolean } = {};
      const late = gate();
      const Api = controller({
        '/stuck': [
          async (signal: unknown) => {
            await release.promise; // ignores its signal
            seen.aborted = (signal as AbortSignal).aborted;
            seen.returned = true;
            late.open();
            return 'late';
          },
          signalParam,
        ],
        '/fails-late': [
          async () => {
            await release.promise;
            throw new BadRequestException('too late to matter');
          },
        ],
        '/quick': [() => 'quick'],
      });
      await using(
        start({
          imports: [FloodgateTimeoutsModule.forRoot({ default: '100ms' })],
          controllers: [Api],
          providers: [interceptor],
        }),
        async ({ url }) => {
          const answer = await get(`${url}/stuck`);
          assert.deepEqual([answer.status, answer.body], [504, '']);
          assert.equal((await get(`${url}/fails-late`)).status, 504);
          release.open();
          await late.promise;
          assert.deepEqual(seen, { aborted: true, returned: true });
          const quick = await get(`${url}/quick`);
          assert.deepEqual([quick.status, quick.body], [200, 'quick']);
        },
      );
    });

    test('@Timeout() with a duration or a policy, @NoTimeout() on a controller, a typo failing the start', async () => {
      const never = () => new Promise(() => {});
      const release = gate();
      const Api = controller({
        '/duration': [() => never(), Timeout('100ms')],
        '/policy': [() => never(), Timeout('slow')],
      });
      const Free = controller(
        {
          '/free': [
            async () => {
              await release.promise;
              return 'free';
            },
          ],
        },
        NoTimeout(),
      );
      await using(
        start({
          imports: [
            FloodgateTimeoutsModule.forRoot({
              default: '100ms',
              policies: { slow: { timeout: '150ms', status: 503, body: 'slow policy' } },
            }),
          ],
          controllers: [Api, Free],
          providers: [interceptor],
        }),
        async ({ url }) => {
          const free = get(`${url}/free`);
          assert.equal((await get(`${url}/duration`)).status, 504);
          const policy = await get(`${url}/policy`);
          assert.deepEqual([policy.status, policy.body], [503, 'slow policy']);
          release.open();
          assert.deepEqual(
            [(await free).status, (await free).body],
            [200, 'free'],
            'no deadline on the controller',
          );
        },
      );
      const Typo = controller({ '/': [() => 'ok', Timeout('slwo')] });
      await assert.rejects(
        start({
          imports: [FloodgateTimeoutsModule.forRoot({ policies: { slow: '1s' } })],
          controllers: [Typo],
          providers: [interceptor],
        }),
        /slwo/,
      );
    });
  });
}
