export type { RequestTimeout } from './context.ts';
export { RequestTimeoutContext } from './context.ts';
export { RequestTimeouts, requestTimeouts, type TimeoutAdapter } from './engine.ts';
export type { OverrunInfo, RequestTimeoutsOptions, TimeoutInfo } from './options.ts';
export type { TimeoutPolicy, TimeoutPolicyOptions, TimeoutPolicySpec } from './policy.ts';
export { disconnectReason, isAbortReason, isTimeoutReason, timeoutReason } from './reasons.ts';
export { kRequestTimeout, requestTimeoutOf } from './registry.ts';
export type { RouteTimeout, TimeoutRouteSetting } from './route.ts';
