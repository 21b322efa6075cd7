#!/usr/bin/env node
import { runBurst } from './burst.ts';
import { runTour } from './tour/index.ts';

const USAGE = `Usage:
  floodgate tour [chapter...]      replay the classic rate-limiting experiments against a local server
  floodgate burst <url> [-n 100] [-c 10] [-H 'name: value']...
                                   fire requests at a URL and summarise statuses and rate-limit fields
  floodgate help`;

/** Dispatches the CLI's subcommands. */
async function main(argv: string[]): Promise<number> {
  const [command, ...args] = argv;
  if (command === undefined || command === 'tour') {
    const only = args.map(Number).filter((n) => Number.isInteger(n) && n > 0);
    await runTour(only.length > 0 ? only : undefined);
    return 0;
  }
  if (command === 'burst') {
    let url: string | undefined;
    let requests = 100;
    let concurrency = 10;
    const headers: Record<string, string> = {};
    for (let i = 0; i < args.length; i++) {
      const arg = args[i];
      if (arg === '-n') requests = Number(args[++i]);
      else if (arg === '-c') concurrency = Number(args[++i]);
      else if (arg === '-H') {
        const [name, ...value] = String(args[++i]).split(':');
        headers[name.trim()] = value.join(':').trim();
      } else url = arg;
    }
    if (url === undefined || !(requests > 0) || !(concurrency > 0) || !URL.canParse(url)) {
      process.stderr.write(`${USAGE}\n`);
      return 2;
    }
    await runBurst({ url, requests, concurrency, headers });
    return 0;
  }
  process.stderr.write(`${USAGE}\n`);
  return command === 'help' || command === '--help' || command === '-h' ? 0 : 2;
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
