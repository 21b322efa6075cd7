/** Terminal output for the CLI: colour only on a TTY and never under NO_COLOR, a progress line only on a TTY. */

const stream = process.stdout;

/** Whether `out` should get colour: a TTY, no `NO_COLOR` (https://no-color.org), not a dumb terminal. */
export function colourFor(out: { isTTY?: boolean }, env: NodeJS.ProcessEnv = process.env): boolean {
  return out.isTTY === true && !('NO_COLOR' in env) && env.TERM !== 'dumb';
}

/** Painters that colour text, or leave it as it is when `colour` is false. */
export interface Palette {
  bold(text: string | number): string;
  dim(text: string | number): string;
  green(text: string | number): string;
  red(text: string | number): string;
  yellow(text: string | number): string;
  cyan(text: string | number): string;
  magenta(text: string | number): string;
  /** A status code (or an error name) coloured by class. */
  status(code: number | string): string;
}

/** The painters, with or without colour. Renderers take a palette so that tests can ask for either. */
export function palette(colour: boolean): Palette {
  const paint =
    (open: number, close: number) =>
    (text: string | number): string =>
      colour ? `\x1b[${open}m${text}\x1b[${close}m` : String(text);
  const green = paint(32, 39);
  const red = paint(31, 39);
  const yellow = paint(33, 39);
  return {
    bold: paint(1, 22),
    dim: paint(2, 22),
    green,
    red,
    yellow,
    cyan: paint(36, 39),
    magenta: paint(35, 39),
    status(code) {
      const n = Number(code);
      if (n >= 200 && n < 300) return green(code);
      if (n === 429 || n === 503) return yellow(code);
      return red(code);
    },
  };
}

/** The palette of standard output. */
export const out = palette(colourFor(stream));
export const { bold, dim, green, red, yellow, cyan, magenta, status } = out;

let progress = '';

/** Writes lines, keeping the progress line (if any) at the bottom. */
export function print(text = ''): void {
  if (progress !== '' && stream.isTTY) stream.write('\r\x1b[2K');
  stream.write(`${text}\n`);
  if (progress !== '' && stream.isTTY) stream.write(progress);
}

/** Sets the progress line (TTY only; elsewhere it would only clutter a log). */
export function setProgress(text: string): void {
  if (!stream.isTTY) return;
  // A line wider than the terminal would wrap, and the next update could not erase it.
  const room = (stream.columns > 0 ? stream.columns : 80) - 1;
  progress = dim([...text].length > room ? `${[...text].slice(0, room - 1).join('')}…` : text);
  stream.write(`\r\x1b[2K${progress}`);
}

/** Clears the progress line. */
export function clearProgress(): void {
  if (!stream.isTTY || progress === '') return;
  progress = '';
  stream.write('\r\x1b[2K');
}

// Escape codes have no width.
const ESCAPE = new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, 'g');

/** The width of `text` on a terminal: escape codes take no room. */
export function visible(text: string): number {
  return [...text.replace(ESCAPE, '')].length;
}

/**
 * The width the CLI writes to: the terminal's `columns`, at most 100 (longer lines are hard to read), 100 when
 * the output is not a terminal. `columns` is 0 or undefined when the terminal does not say (a pipe, a
 * pseudo-terminal under `script`).
 */
export function terminalWidth(columns: number | undefined): number {
  return columns !== undefined && columns > 0 ? Math.min(100, columns) : 100;
}

/** The width of standard output. */
export function stdoutWidth(): number {
  return terminalWidth(stream.isTTY ? stream.columns : undefined);
}

/**
 * Wraps `text` at spaces so that no line is wider than `width` columns, the first line starting with
 * `first` and the others with `rest`. Words are never broken: a word wider than the line gets a line of its
 * own. Runs of white space (the indentation of a template literal) count as one space.
 */
export function wrap(text: string, first: string, rest = first, width = stdoutWidth()): string {
  const lines: string[] = [];
  let line = '';
  let indent = first;
  for (const word of text.split(/\s+/)) {
    if (word === '') continue;
    if (line !== '' && visible(indent) + visible(line) + 1 + visible(word) > width) {
      lines.push(indent + line);
      indent = rest;
      line = word;
    } else line = line === '' ? word : `${line} ${word}`;
  }
  if (line !== '' || lines.length === 0) lines.push(indent + line);
  return lines.join('\n');
}
