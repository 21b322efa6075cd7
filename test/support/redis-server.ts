/**
 * Real redis-server processes for tests, on free ports, never 6379: started here, stopped on teardown and on
 * process exit. A Cluster (masters, optionally replicas) is created with `redis-cli --cluster create`.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const live = new Set<RedisServer>();
process.on('exit', () => {
  for (const server of live) server.process.kill('SIGKILL');
});

/** A port the OS says is free now. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** One redis-server process. */
export class RedisServer {
  private constructor(
    readonly port: number,
    public process: ChildProcess,
    private readonly args: string[],
    private readonly dir: string,
  ) {}

  /** Starts a server on a free port (`cluster` adds `--cluster-enabled yes`) and waits until it answers PING. */
  static async start(options: { cluster?: boolean } = {}): Promise<RedisServer> {
    const port = await freePort();
    const dir = mkdtempSync(join(tmpdir(), 'floodgate-redis-'));
    const args = [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--dir',
      dir,
    ];
    if (options.cluster) {
      args.push('--cluster-enabled', 'yes', '--cluster-config-file', join(dir, 'nodes.conf'));
      args.push('--cluster-node-timeout', '2000');
    }
    const server = new RedisServer(port, spawnServer(args), args, dir);
    live.add(server);
    await server.ready();
    return server;
  }

  /** `redis-cli -p port …` and its output. */
  async cli(...args: string[]): Promise<string> {
    const { stdout } = await run('redis-cli', ['-p', String(this.port), ...args]);
    return stdout.trim();
  }

  /** Waits until the server answers PING. */
  async ready(timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (await ping(this.port)) return;
      await new Promise((r) => setTimeout(r, 20));
    }
    throw new Error(`redis-server on port ${this.port} did not answer PING in ${timeoutMs} ms`);
  }

  /** SIGKILL: the server is gone, its data with it. */
  async kill(): Promise<void> {
    if (this.process.exitCode !== null || this.process.signalCode !== null) return;
    const exited = new Promise((r) => this.process.once('exit', r));
    this.process.kill('SIGKILL');
    await exited;
  }

  /** Starts it again on the same port (after {@link kill}). */
  async restart(): Promise<void> {
    await this.kill();
    this.process = spawnServer(this.args);
    await this.ready();
  }

  /** SIGSTOP / SIGCONT: slow, not down — connections stay open and nothing answers. */
  pause(): void {
    this.process.kill('SIGSTOP');
  }
  resume(): void {
    this.process.kill('SIGCONT');
  }

  /** Stops the server and removes its directory. */
  async stop(): Promise<void> {
    this.resume();
    await this.kill();
    live.delete(this);
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** One node as `CLUSTER NODES` describes it. */
export interface ClusterNode {
  server: RedisServer;
  id: string;
  role: 'master' | 'replica';
  /** The master's id, for a replica. */
  masterId: string | undefined;
  /** Slot ranges served, inclusive: `[[0, 5460]]`. */
  slots: [number, number][];
}

/**
 * A Cluster of `masters` masters and `replicas` replicas per master, every slot assigned. Nodes are started
 * here; roles and slot ranges are read back from `CLUSTER NODES` ({@link describe}), never assumed.
 */
export class RedisCluster {
  private constructor(readonly servers: RedisServer[]) {}

  static async start(masters = 3, replicas = 0): Promise<RedisCluster> {
    const servers = await Promise.all(
      Array.from({ length: masters * (1 + replicas) }, () => RedisServer.start({ cluster: true })),
    );
    const nodes = servers.map((s) => `127.0.0.1:${s.port}`);
    await run('redis-cli', [
      '--cluster',
      'create',
      ...nodes,
      '--cluster-replicas',
      String(replicas),
      '--cluster-yes',
    ]);
    const cluster = new RedisCluster(servers);
    await cluster.settled(servers, masters * replicas);
    return cluster;
  }

  /** Waits until every server in `servers` says cluster_state:ok and the first sees `replicas` replicas. */
  async settled(servers = this.servers, replicas = 0, timeoutMs = 20_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      const states = await Promise.all(servers.map((s) => s.cli('cluster', 'info').catch(() => '')));
      if (states.every((info) => info.includes('cluster_state:ok'))) {
        const nodes = await this.describe(servers[0]).catch(() => []);
        if (nodes.filter((n) => n.role === 'replica').length >= replicas) return;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error('the test cluster did not reach cluster_state:ok');
  }

  /** The nodes as `from` sees them (`CLUSTER NODES`), failed ones left out. */
  async describe(from: RedisServer = this.servers[0]): Promise<ClusterNode[]> {
    const text = await from.cli('cluster', 'nodes');
    const out: ClusterNode[] = [];
    for (const line of text.split('\n')) {
      const [id, address, flags, masterId, , , , , ...slots] = line.trim().split(' ');
      if (flags === undefined || flags.includes('fail')) continue;
      const port = Number(address.split('@')[0].split(':')[1]);
      const server = this.servers.find((s) => s.port === port);
      if (server === undefined) continue;
      out.push({
        server,
        id,
        role: flags.includes('master') ? 'master' : 'replica',
        masterId: masterId === '-' ? undefined : masterId,
        slots: slots
          .filter((r) => !r.startsWith('['))
          .map((r) => {
            const [lo, hi] = r.split('-').map(Number);
            return [lo, hi ?? lo] as [number, number];
          }),
      });
    }
    return out;
  }

  /** Host and port of every node started, as cluster clients want them. */
  get nodes(): { host: string; port: number }[] {
    return this.servers.map((s) => ({ host: '127.0.0.1', port: s.port }));
  }

  async stop(): Promise<void> {
    await Promise.all(this.servers.map((s) => s.stop()));
  }
}

function spawnServer(args: string[]): ChildProcess {
  const child = spawn('redis-server', args, { stdio: 'ignore' });
  child.on('error', () => {}); // reported by ready() timing out
  return child;
}

function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = new Socket();
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => done(false));
    socket.once('error', () => done(false));
    socket.connect(port, '127.0.0.1', () => socket.write('PING\r\n'));
    socket.once('data', (data) => done(data.toString().startsWith('+PONG')));
  });
}
