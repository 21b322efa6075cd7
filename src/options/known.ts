/**
 * Unknown option names are refused: `fixedWindow({ queuelimit: 5 })` would otherwise build a limiter without a
 * queue and nobody would know. Every public options object lists its names in a const array beside its type
 * and calls {@link rejectUnknown} first.
 */

/**
 * Throws a `TypeError` naming the first own property of `options` that is not in `known`, with the closest
 * known name when one is near (`fixedWindow: unknown option "queuelimit"; did you mean "queueLimit"?`).
 * Does nothing when `options` is not an object: the caller's own checks say what is wrong with it.
 */
export function rejectUnknown(where: string, options: unknown, known: readonly string[]): void {
  if (options === null || typeof options !== 'object') return;
  for (const name of Object.keys(options)) {
    if (!known.includes(name)) throw new TypeError(unknownMessage(where, 'option', name, known));
  }
}

/** `where: unknown option "name"` with the closest known name, if any is near. */
export function unknownMessage(where: string, what: string, name: string, known: readonly string[]): string {
  const near = closest(name, known);
  const shown = JSON.stringify(name.length > 60 ? `${name.slice(0, 60)}…` : name);
  return `${where}: unknown ${what} ${shown}${near === undefined ? '' : `; did you mean "${near}"?`}`;
}

/**
 * The known name nearest to `name`, or `undefined` when none is near: at most a third of the name's letters
 * changed (at least 2; 1 in names of up to 4 letters), case ignored, a swap of two neighbours counting as one;
 * else the first known name that `name` (3 letters or more) begins.
 */
export function closest(name: string, known: readonly string[]): string | undefined {
  const wanted = name.toLowerCase();
  const limit = wanted.length <= 4 ? 1 : Math.max(2, Math.ceil(wanted.length / 3));
  let best: string | undefined;
  let bestDistance = limit + 1;
  for (const candidate of known) {
    const distance = editDistance(wanted, candidate.toLowerCase());
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  // A name cut short (`base` for `baseMs`) is far by letters but plainly meant: the first known name it begins.
  if (best === undefined && wanted.length >= 3) {
    best = known.find((candidate) => candidate.toLowerCase().startsWith(wanted));
  }
  return best;
}

/** Optimal string alignment distance: insertions, deletions, substitutions and adjacent swaps. */
export function editDistance(a: string, b: string): number {
  const rows = a.length + 1;
  const cols = b.length + 1;
  const d: number[] = new Array(rows * cols);
  for (let i = 0; i < rows; i++) d[i * cols] = i;
  for (let j = 0; j < cols; j++) d[j] = j;
  for (let i = 1; i < rows; i++) {
    for (let j = 1; j < cols; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let value = Math.min(
        d[(i - 1) * cols + j] + 1,
        d[i * cols + j - 1] + 1,
        d[(i - 1) * cols + j - 1] + cost,
      );
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        value = Math.min(value, d[(i - 2) * cols + j - 2] + 1);
      }
      d[i * cols + j] = value;
    }
  }
  return d[rows * cols - 1];
}
