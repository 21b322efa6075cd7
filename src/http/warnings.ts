/**
 * Misconfiguration warnings, each at most once per process: `process.emitWarning` with a `FLOODGATE_*` code,
 * so `--no-warnings`, `process.on('warning')` and the warning's code work as for Node's own.
 */
import { emitFloodgateWarning } from '../warning.ts';

const emitted = new Set<string>();
let silenced = false;

/** No more warnings in this process (`rateLimiting({ validate: false })`). */
export function silenceWarnings(): void {
  silenced = true;
}

/** Emits warning `code` unless it was emitted already by this process. */
export function warnOnce(code: string, message: string): void {
  if (silenced || emitted.has(code)) return;
  emitted.add(code);
  emitFloodgateWarning(code, message);
}

/** @internal For the tests: forget which warnings were emitted. */
export function resetWarnings(): void {
  emitted.clear();
  silenced = false;
}
