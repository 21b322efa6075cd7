export { rejectUnknown } from '../options/known.ts';

// The names each options object accepts; any other is refused by the shared rejectUnknown.
export const CLIENT_OPTIONS = [
  'limiter',
  'key',
  'onLimited',
  'pause',
  'retry',
  'adaptive',
  'maxPartitions',
  'clock',
  'now',
  'random',
] as const;
export const FETCH_OPTIONS = [...CLIENT_OPTIONS, 'fetch', 'cost'] as const;
export const INTERCEPTOR_OPTIONS = [...CLIENT_OPTIONS, 'cost'] as const;
export const PAUSE_OPTIONS = ['statuses', 'max', 'jitter', 'maxEntries'] as const;
export const RETRY_OPTIONS = [
  'attempts',
  'methods',
  'budget',
  'minRetries',
  'windowMs',
  'backoff',
  'isFailure',
] as const;
export const BACKOFF_OPTIONS = ['baseMs', 'maxMs'] as const;
export const ADAPTIVE_OPTIONS = ['k', 'historyMs', 'maxRejection', 'minRequests', 'isFailure'] as const;
