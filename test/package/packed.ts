/**
 * floodgate as npm users get it. The package's sources are copied to a temporary directory as a fresh clone has
 * them (no dist/), `npm pack` packs them (its `prepack` builds), and the tarball is unpacked into the
 * node_modules of an empty consumer project. Nothing is written to the worktree, so test files can do this at
 * the same time.
 */
import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

export const run = promisify(execFile);
export const repo = fileURLToPath(new URL('../../', import.meta.url));
/** The project's own TypeScript compiler. */
export const tsc = join(repo, 'node_modules', '.bin', 'tsc');

/** What a fresh clone holds that packing needs (the rest, tests and benchmarks, plays no part). */
const sources = [
  'package.json',
  'README.md',
  'LICENSE',
  'docs',
  'src',
  'tsconfig.json',
  'tsconfig.build.json',
  'scripts/mark-commonjs.mjs',
  'scripts/prune-declarations.mjs',
];

export interface Packed {
  /** A temporary directory holding everything below; remove it with {@link Packed.remove}. */
  readonly root: string;
  /** The tarball `npm pack` wrote. */
  readonly tarball: string;
  /** The paths in the tarball, as `npm pack --json` lists them. */
  readonly files: readonly string[];
  remove(): void;
}

/** Packs the package from a copy of its sources, building on the way (`prepack`). */
export async function pack(): Promise<Packed> {
  const root = mkdtempSync(join(tmpdir(), 'floodgate-pack-'));
  const clone = join(root, 'clone');
  for (const name of sources) {
    if (existsSync(join(repo, name))) cpSync(join(repo, name), join(clone, name), { recursive: true });
  }
  symlinkSync(join(repo, 'node_modules'), join(clone, 'node_modules'), 'dir');
  const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', root], {
    cwd: clone,
    maxBuffer: 16 << 20,
  });
  // Lifecycle scripts may print before the JSON report.
  const report = JSON.parse(stdout.slice(stdout.indexOf('[\n'))) as [
    { filename: string; files: { path: string }[] },
  ];
  return {
    root,
    tarball: join(root, report[0].filename),
    files: report[0].files.map((file) => file.path).sort(),
    remove: () => rmSync(root, { recursive: true, force: true }),
  };
}

/**
 * An empty project in `packed.root` with the tarball unpacked as `node_modules/floodgate`, and `links`
 * (package names: ipaddr.js, @types/node, express…) linked from this project's node_modules, as if installed.
 */
export async function consumer(
  packed: Packed,
  name: string,
  packageJson: object,
  links: readonly string[],
): Promise<string> {
  const dir = join(packed.root, name);
  const installed = join(dir, 'node_modules', 'floodgate');
  mkdirSync(installed, { recursive: true });
  await run('tar', ['-xzf', packed.tarball, '-C', installed, '--strip-components=1']);
  for (const link of links) {
    const target = join(dir, 'node_modules', link);
    mkdirSync(dirname(target), { recursive: true });
    symlinkSync(join(repo, 'node_modules', link), target, 'dir');
  }
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name, private: true, ...packageJson }));
  return dir;
}

/**
 * Writes `dir/tsconfig.json` as a careful consumer would: strict, `module: nodenext`, Node's types, the library
 * declarations checked too (`skipLibCheck: false`); `options` adds to or overrides these.
 */
export function writeTsconfig(dir: string, files: readonly string[], options: object = {}): void {
  const compilerOptions = {
    module: 'nodenext',
    target: 'es2022',
    strict: true,
    skipLibCheck: false,
    types: ['node'],
  };
  writeFileSync(
    join(dir, 'tsconfig.json'),
    JSON.stringify({ compilerOptions: { ...compilerOptions, ...options }, files }),
  );
}
