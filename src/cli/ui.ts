/** Terminal output for the CLI: colour only on a TTY and never under NO_COLOR, a progress line only on a TTY. */

const stream = process.stdout;
const colour = stream.isTTY === true && !('NO_COLOR' in process.env) && process.env.TERM !== 'dumb';

const paint =
  (open: number, close: number) =>
  (text: string | number): string =>
    colour ? `\x1b[${open}m${text}\x1b[${close}m` : String(text);

export const bold = paint(1, 22);
export const dim = paint(2, 22);
export const green = paint(32, 39);
export const red = paint(31, 39);
export const yellow = paint(33, 39);
export const cyan = paint(36, 39);
export const magenta = paint(35, 39);

/** A status code coloured by class. */
export function status(code: number | string): string {
  const n = Number(code);
  if (n >= 200 && n < 300) return green(code);
  if (n === 429 || n === 503) return yellow(code);
  return red(code);
}

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
  progress = dim(text);
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
const visible = (s: string): number => s.replace(ESCAPE, '').length;

/** Wraps `text` to the terminal width (at most 100 columns), indenting every line by `indent`. */
export function wrap(text: string, indent: string): string {
  // `columns` is 0 or undefined when the terminal does not say (a pseudo-terminal under `script`, a pipe).
  const columns = stream.columns > 0 ? stream.columns : 100;
  const width = Math.max(40, Math.min(100, columns) - indent.length);
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/)) {
    if (word === '') continue;
    if (line !== '' && visible(line) + 1 + visible(word) > width) {
      lines.push(line);
      line = word;
    } else line = line === '' ? word : `${line} ${word}`;
  }
  if (line !== '') lines.push(line);
  return lines.map((l) => indent + l).join('\n');
}
