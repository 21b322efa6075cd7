/**
 * floodgate's warnings: `process.emitWarning` with type `FloodgateWarning` and a `FLOODGATE_*` code, so
 * `process.on('warning')`, `--no-warnings` and the code work as for Node's own, and an application can tell
 * floodgate's from others by `warning.name`.
 */

/** Emits a `FloodgateWarning` with `code` (every time: once-only is the caller's business). */
export function emitFloodgateWarning(code: string, message: string): void {
  const emit = (globalThis as { process?: { emitWarning?: (m: string, o: object) => void } }).process
    ?.emitWarning;
  if (typeof emit === 'function') emit(message, { type: 'FloodgateWarning', code });
  else console.warn(`${code}: ${message}`);
}
