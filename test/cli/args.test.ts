import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { parseCommand, UsageError } from '../../src/cli/args.ts';

const parse = (...argv: string[]) => parseCommand(argv, 9);

/** The message of the UsageError that `argv` gives. */
function error(...argv: string[]): string {
  try {
    parse(...argv);
  } catch (e) {
    assert.ok(e instanceof UsageError, `expected a UsageError, got ${e}`);
    return e.message;
  }
  assert.fail(`${argv.join(' ')} was accepted`);
}

describe('parseCommand()', () => {
  test('no arguments, help, version', () => {
    assert.deepEqual(parse(), { kind: 'usage' });
    assert.deepEqual(parse('--help'), { kind: 'help' });
    assert.deepEqual(parse('-h'), { kind: 'help' });
    assert.deepEqual(parse('help', 'burst'), { kind: 'help', topic: 'burst' });
    assert.deepEqual(parse('burst', '--help'), { kind: 'help', topic: 'burst' });
    assert.deepEqual(parse('tour', '-h'), { kind: 'help', topic: 'tour' });
    assert.deepEqual(parse('--version'), { kind: 'version' });
    assert.deepEqual(parse('-V'), { kind: 'version' });
    assert.deepEqual(parse('-v'), { kind: 'version' }, '-v is --version, as in most CLIs');
  });

  test('burst -t: a bare number is refused (seconds to autocannon, milliseconds to floodgate), a unit says which', () => {
    const timeoutOf = (t: string) =>
      (parse('burst', 'http://h/', '-t', t) as { options: { timeoutMs: number } }).options.timeoutMs;
    assert.equal(timeoutOf('5s'), 5_000);
    assert.equal(timeoutOf('5ms'), 5);
    assert.equal(timeoutOf('1m'), 60_000);
    assert.equal(error('burst', 'http://h/', '-t', '5'), 'burst: --timeout needs a unit: 5s or 5ms; got "5"');
    assert.match(error('burst', 'http://h/', '--timeout=2.5'), /needs a unit: 2.5s or 2.5ms/);
  });

  test('burst: defaults, and every option', () => {
    assert.deepEqual(parse('burst', 'http://localhost:3000'), {
      kind: 'burst',
      options: {
        url: 'http://localhost:3000/',
        requests: 100,
        concurrency: 10,
        method: 'GET',
        headers: [],
        body: undefined,
        timeoutMs: 10_000,
      },
    });
    const long = parse(
      'burst',
      'https://api.example/v1',
      '--requests=20',
      '--concurrency',
      '4',
      '-d',
      '{}',
      '-H',
      'Authorization: Bearer a:b',
      '--header',
      'x-a:1',
      '-t',
      '1.5s',
    );
    assert.deepEqual(long, {
      kind: 'burst',
      options: {
        url: 'https://api.example/v1',
        requests: 20,
        concurrency: 4,
        method: 'POST',
        headers: [
          ['Authorization', 'Bearer a:b'],
          ['x-a', '1'],
        ],
        body: '{}',
        timeoutMs: 1_500,
      },
    });
    assert.equal(
      (parse('burst', 'http://h/', '-X', 'DELETE', '-t', '250ms') as { options: { method: string } }).options
        .method,
      'DELETE',
    );
  });

  test('tour: chapters by number', () => {
    assert.deepEqual(parse('tour'), { kind: 'tour', chapters: undefined, html: undefined });
    assert.deepEqual(parse('tour', '9', '3', '3'), { kind: 'tour', chapters: [9, 3], html: undefined });
  });

  test('every bad argument says what is wrong', () => {
    assert.equal(
      error('burst', 'http://h/', '-n', 'abc'),
      'burst: --requests must be a whole number of at least 1; got "abc"',
    );
    assert.match(
      error('burst', 'http://h/', '-n', '0'),
      /--requests must be a whole number of at least 1; got "0"/,
    );
    assert.match(error('burst', 'http://h/', '-c', '-3'), /--concurrency must be .*; got "-3"/);
    assert.match(error('burst', 'http://h/', '-c', '0.5'), /--concurrency must be .*; got "0.5"/);
    assert.match(error('burst', 'not-a-url'), /"not-a-url" is not an http:\/\/ or https:\/\/ URL/);
    assert.match(error('burst', 'ftp://h/'), /not an http:\/\/ or https:\/\/ URL/);
    assert.equal(error('burst', 'http://h/', '--bogus'), 'burst: unknown option "--bogus"');
    assert.equal(
      error('burst', 'http://h/', '--concurency', '3'),
      'burst: unknown option "--concurency"; did you mean "--concurrency"?',
    );
    assert.match(
      error('burst', 'http://h/', '-H', 'nocolon'),
      /a header is 'Name: value', with a colon; got "nocolon"/,
    );
    assert.match(error('burst', 'http://h/', '-H', 'bad name: 1'), /"bad name" is not a valid header name/);
    assert.match(error('burst', 'http://h/', '-X', 'GE T'), /--method must be an HTTP method/);
    assert.match(error('burst', 'http://h/', '-t', 'soon'), /--timeout must be a positive duration/);
    assert.match(error('burst', 'http://h/', '-n'), /option -n needs a value/);
    assert.match(error('burst', 'http://h/', '--help=yes'), /option --help takes no value/);
    assert.match(error('burst'), /which URL/);
    assert.match(error('burst', 'http://a/', 'http://b/'), /unexpected argument "http:\/\/b\/"/);
    assert.equal(error('tour', '99'), 'tour: no chapter 99; the chapters are 1 to 9');
    assert.equal(error('tour', '0'), 'tour: no chapter 0; the chapters are 1 to 9');
    assert.equal(error('tour', 'nope'), 'tour: a chapter is a number from 1 to 9; got "nope"');
    assert.equal(error('tuor'), 'floodgate: unknown command "tuor"; did you mean "tour"?');
    assert.match(error('--bogus'), /unknown option "--bogus"/);
    assert.match(error('-n', 'abc'), /-n is an option of burst/);
  });
});

const main = fileURLToPath(new URL('../../src/cli/main.ts', import.meta.url));

/** Runs the CLI in its own process; resolves to its exit code and output. */
async function cli(...args: string[]) {
  try {
    const { stdout, stderr } = await promisify(execFile)(
      process.execPath,
      ['--import', 'tsx', main, ...args],
      {
        env: { ...process.env, NO_COLOR: '1' },
      },
    );
    return { code: 0, stdout, stderr };
  } catch (e) {
    const failed = e as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

describe('floodgate, the process', () => {
  test('no arguments: usage on stdout, exit 0', async () => {
    const { code, stdout, stderr } = await cli();
    assert.equal(code, 0);
    assert.match(stdout, /^Usage: floodgate <command>/);
    assert.equal(stderr, '');
  });

  test('--help on stdout; --version prints the package version', async () => {
    const help = await cli('burst', '--help');
    assert.equal(help.code, 0);
    assert.match(help.stdout, /^Usage: floodgate burst <url>/);
    const version = await cli('--version');
    assert.equal(version.code, 0);
    assert.match(version.stdout, /^floodgate \d+\.\d+\.\d+/);
  });

  test('a bad argument: the reason on stderr, where to look, exit 2', async () => {
    const { code, stdout, stderr } = await cli('burst', 'http://h/', '-n', 'abc');
    assert.equal(code, 2);
    assert.equal(stdout, '');
    assert.equal(
      stderr,
      'floodgate: burst: --requests must be a whole number of at least 1; got "abc"\nSee \'floodgate burst --help\'.\n',
    );
    assert.equal((await cli('tour', '99')).code, 2);
  });

  test('tour chapter 8 shows its FloodgateWarning as its own output, not as a raw warning on stderr', async () => {
    const { code, stdout, stderr } = await cli('tour', '8');
    assert.equal(code, 0);
    assert.doesNotMatch(stderr, /FloodgateWarning/);
    assert.match(stdout, /floodgate warned, once per process \(FLOODGATE_UNTRUSTED_PROXY\)/);
  });

  test('burst with no HTTP answer at all exits 1', async () => {
    const server = http.createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    await new Promise((resolve) => server.close(resolve));
    const { code, stdout } = await cli('burst', `http://127.0.0.1:${port}/`, '-n', '3');
    assert.equal(code, 1);
    assert.match(stdout, /3 × ECONNREFUSED/);
  });
});
