/**
 * The pieces of test/integration/rolling-upgrade.test.ts: the previous release unpacked from
 * test/fixtures/previous-release.tgz (scripts/fixtures/previous-release.ts builds it), relays and
 * consumers of either release as child processes (test/support/rolling-worker.ts), and a writer
 * that appends versioned events through either release's appendToOutbox.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import type pg from 'pg';
import { AMQP_URL, DATABASE_URL } from './rig.js';

type Converge = typeof import('../../src/index.js');

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const run = promisify(execFile);

export interface PreviousRelease {
  commit: string;
  /** The unpacked package's dist/index.js. */
  dist: string;
  /** Its `converge` command. */
  bin: string;
  library: Converge;
  remove(): Promise<void>;
}

/** Unpacks the previous release into a temp dir; its pg and amqplib resolve to this checkout's node_modules. */
export async function unpackPreviousRelease(): Promise<PreviousRelease> {
  const dir = await mkdtemp(join(tmpdir(), 'converge-previous-'));
  try {
    await run('tar', ['-xzf', join(ROOT, 'test', 'fixtures', 'previous-release.tgz'), '-C', dir]);
    await symlink(join(ROOT, 'node_modules'), join(dir, 'package', 'node_modules'), 'dir');
    const dist = join(dir, 'package', 'dist', 'index.js');
    const commit = (await readFile(join(ROOT, 'test', 'fixtures', 'previous-release.commit'), 'utf8')).trim();
    const library = (await import(pathToFileURL(dist).href)) as Converge;
    const remove = () => rm(dir, { recursive: true, force: true });
    return { commit, dist, bin: join(dir, 'package', 'bin', 'converge.js'), library, remove };
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
}

/** Runs the previous release's `converge` command to completion. */
export async function previousCli(
  release: PreviousRelease,
  args: string[],
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [release.bin, '--database-url', DATABASE_URL, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, AMQP_URL },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const [code] = (await once(child, 'exit')) as [number | null];
  return { code, stdout, stderr };
}

export interface Names {
  schema: string;
  exchange: string;
  queue: string;
}

/** A relay or consumer child process; `published` holds the event ids a relay marked published. */
export class Worker {
  readonly published = new Set<string>();
  readonly child: ChildProcess;
  #stderr = '';
  #ready: Promise<void>;

  constructor(
    readonly tag: string,
    role: 'relay' | 'consumer',
    code: string,
    names: Names,
  ) {
    const settings = { role, code, tag, connectionString: DATABASE_URL, amqpUrl: AMQP_URL, ...names };
    this.child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'test', 'support', 'rolling-worker.ts')], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ROLLING_WORKER: JSON.stringify(settings) },
    });
    this.child.stderr!.on('data', (chunk: Buffer) => (this.#stderr += chunk.toString()));
    this.#ready = new Promise((resolve, reject) => {
      let pending = '';
      this.child.stdout!.on('data', (chunk: Buffer) => {
        pending += chunk.toString();
        const lines = pending.split('\n');
        pending = lines.pop()!;
        for (const line of lines) {
          if (line === 'ready') resolve();
          else if (line.startsWith('published ')) for (const id of line.slice(10).split(',')) this.published.add(id);
        }
      });
      this.child.once('exit', (code, signal) =>
        reject(this.#failure(`exited (${code ?? signal}) before it was ready`)),
      );
    });
    this.#ready.catch(() => undefined);
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  ready(): Promise<void> {
    return this.#ready;
  }

  /** SIGTERM, as a deployment stops an instance: the worker must finish what it holds and exit 0. */
  async stop(): Promise<void> {
    if (!this.running) throw this.#failure(`had exited (${this.child.exitCode ?? this.child.signalCode}) before stop`);
    const exited = once(this.child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
    this.child.kill('SIGTERM');
    const [code, signal] = await exited;
    if (code !== 0) throw this.#failure(`stopped with ${code ?? signal}`);
  }

  /** For cleanup after a failure: nothing may outlive the test. */
  async kill(): Promise<void> {
    if (!this.running) return;
    const exited = once(this.child, 'exit');
    this.child.kill('SIGKILL');
    await exited;
  }

  #failure(what: string): Error {
    return new Error(`${this.tag} ${what}; stderr:\n${this.#stderr.slice(-4000)}`);
  }
}

export interface Written {
  eventId: string;
  aggregateId: string;
  version: number;
  delta: number;
}

/**
 * Appends `Added` events round-robin over a few aggregates, each at its next version, one
 * transaction per event, alternating the previous release's appendToOutbox and this one's.
 */
export class Writer {
  readonly written: Written[] = [];
  readonly #versions = new Map<string, number>();

  constructor(
    private readonly pool: pg.Pool,
    private readonly schema: string,
    private readonly libraries: [Converge, Converge],
    private readonly aggregates = ['a1', 'a2', 'a3', 'a4'],
  ) {}

  async write(count: number): Promise<Written[]> {
    const batch: Written[] = [];
    for (let i = 0; i < count; i++) {
      const n = this.written.length;
      const aggregateId = this.aggregates[n % this.aggregates.length]!;
      const version = (this.#versions.get(aggregateId) ?? 0) + 1;
      const library = this.libraries[n % 2]!;
      const delta = n + 1;
      const appended = await library.withTransaction(this.pool, (client) =>
        library.appendToOutbox(
          client,
          { aggregateType: 'tally', aggregateId, aggregateVersion: version, eventType: 'Added', payload: { delta } },
          { schema: this.schema },
        ),
      );
      this.#versions.set(aggregateId, version);
      const row = { eventId: appended.eventId, aggregateId, version, delta };
      this.written.push(row);
      batch.push(row);
    }
    return batch;
  }
}
