#!/usr/bin/env node
import { METER_VERSION } from '../telemetry.ts';
import { BURST_USAGE, KEYS_USAGE, parseCommand, TOUR_USAGE, USAGE, UsageError } from './args.ts';
import { runBurst } from './burst.ts';
import { runKeys } from './keys.ts';
import { chapters, runTour } from './tour/index.ts';

/** The package's version: the meter's, which a test keeps equal to package.json's. */
function version(): string {
  return METER_VERSION;
}

const HELP = { floodgate: USAGE, tour: TOUR_USAGE, burst: BURST_USAGE, keys: KEYS_USAGE };

/** Runs the command line; resolves to the exit code (2 for a command line it cannot run). */
async function main(argv: string[]): Promise<number> {
  let command: ReturnType<typeof parseCommand>;
  try {
    command = parseCommand(argv, chapters.length);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    const help = error.topic === undefined ? 'floodgate --help' : `floodgate ${error.topic} --help`;
    process.stderr.write(`floodgate: ${error.message.replace(/^floodgate: /, '')}\nSee '${help}'.\n`);
    return 2;
  }
  switch (command.kind) {
    case 'usage':
      process.stdout.write(`${USAGE}\n`);
      return 0;
    case 'help':
      process.stdout.write(`${HELP[command.topic ?? 'floodgate']}\n`);
      return 0;
    case 'version':
      process.stdout.write(`floodgate ${version()}\n`);
      return 0;
    case 'tour':
      await runTour(command.chapters, command.html, version());
      return 0;
    case 'burst': {
      // The first Ctrl-C stops the burst and prints what it saw; a second one ends the process at once.
      const stop = new AbortController();
      process.once('SIGINT', () => {
        stop.abort();
        process.once('SIGINT', () => process.exit(130));
      });
      const { code } = await runBurst(command.options, {
        out: process.stdout,
        err: process.stderr,
        signal: stop.signal,
      });
      return stop.signal.aborted ? 130 : code;
    }
    case 'keys':
      return runKeys(command.options, { out: process.stdout, err: process.stderr });
  }
}

// `floodgate tour | head` closes the pipe early: that is not an error.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code === 'EPIPE') process.exit(0);
  throw error;
});

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(
      `floodgate: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    );
    process.exitCode = 1;
  },
);
