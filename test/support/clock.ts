import { mock } from 'node:test';

/** A clock the test moves by hand, with Node's mocked setTimeout moving along so queue wake-ups fire in step. */
export interface ManualClock {
  now(): number;
  /** Moves time forward by `ms` and runs the timers that fall due. */
  advance(ms: number): void;
  /** Moves time to `t`. */
  set(t: number): void;
}

/** A manual clock at `start`; call inside a test (mocks setTimeout for that test when `timers` is true). */
export function manualClock(start = 0, timers = true): ManualClock {
  let t = start;
  if (timers) {
    mock.timers.reset();
    mock.timers.enable({ apis: ['setTimeout'] });
  }
  return {
    now: () => t,
    advance(ms) {
      t += ms;
      if (timers) mock.timers.tick(ms);
    },
    set(target) {
      this.advance(target - t);
    },
  };
}

/** Lets promise reactions run. */
export async function flush(): Promise<void> {
  for (let i = 0; i < 3; i++) await Promise.resolve();
}

/** Tracks a promise's outcome synchronously readable after {@link flush}. */
export function track<T>(promise: Promise<T>): { value?: T; error?: unknown; settled: boolean } {
  const state: { value?: T; error?: unknown; settled: boolean } = { settled: false };
  promise.then(
    (value) => {
      state.value = value;
      state.settled = true;
    },
    (error) => {
      state.error = error;
      state.settled = true;
    },
  );
  return state;
}
