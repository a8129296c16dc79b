/**
 * The parent side of a worker process (see workers/ipc.ts). A worker that dies, or reports a
 * fatal error, rejects `failure`, so a waiting measurement fails at once with the child's
 * own words instead of running into its timeout.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { EventEmitter } from 'node:events';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { AMQP_URL, DATABASE_URL, runAbort, withTimeout } from './env.js';
import type { ToChild, ToParent } from './workers/ipc.js';

const REPO_ROOT = fileURLToPath(new URL('..', import.meta.url));

/** Every worker still running, so an interrupted run can end them all (each by its own handle). */
const live = new Set<Worker>();

export function killAllWorkers(): void {
  for (const worker of live) worker.kill();
}

export interface WorkerResult {
  maxRssMb: number;
  data: Record<string, unknown>;
}

export class Worker extends EventEmitter<{ progress: [count: number] }> {
  readonly name: string;
  readonly failure: Promise<never>;
  info: Record<string, unknown> = {};
  progress = 0;
  lastError: string | undefined;
  readonly #child: ChildProcess;
  #result: Promise<WorkerResult>;
  #stopping = false;

  private constructor(name: string, config: Record<string, unknown>, compiledIn?: string) {
    super();
    this.name = name;
    const env = {
      ...process.env,
      BENCH_WORKER: JSON.stringify({ databaseUrl: DATABASE_URL, amqpUrl: AMQP_URL, ...config }),
    };
    // stdout is piped to our stderr: the parent's stdout carries only the table and the JSON line.
    // Compiled: tsc's output run by plain node, as a user runs the package (no tsx loader in the RSS).
    const entry = compiledIn
      ? [path.join(compiledIn, 'bench', 'workers', `${name}.js`)]
      : ['--import', 'tsx', `bench/workers/${name}.ts`];
    this.#child = spawn(process.execPath, entry, {
      cwd: REPO_ROOT,
      env,
      stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
    });
    this.#child.stdout?.pipe(process.stderr);
    let rejectFailure!: (err: Error) => void;
    this.failure = new Promise<never>((_, reject) => (rejectFailure = reject));
    this.failure.catch(() => undefined);
    let resolveResult!: (result: WorkerResult) => void;
    this.#result = new Promise((resolve) => (resolveResult = resolve));
    this.#child.on('message', (message: ToParent) => {
      if (message.type === 'ready') this.info = message.info;
      else if (message.type === 'progress') {
        this.progress = message.count;
        this.emit('progress', message.count);
      } else if (message.type === 'error') this.lastError = message.message;
      else if (message.type === 'fatal') rejectFailure(new Error(`${name} worker failed: ${message.message}`));
      else if (message.type === 'result') resolveResult({ maxRssMb: message.maxRssKb / 1024, data: message.data });
    });
    live.add(this);
    this.#child.on('exit', (code, signal) => {
      live.delete(this);
      if (!this.#stopping)
        rejectFailure(
          new Error(
            `${name} worker exited unexpectedly (code ${code}, signal ${signal})${this.lastError ? `; last error: ${this.lastError}` : ''}`,
          ),
        );
    });
  }

  /** Starts the process and waits until it has set itself up (imports, options, connections it opens eagerly). */
  static async spawn(
    name: string,
    config: Record<string, unknown>,
    readyTimeoutMs = 30_000,
    compiledIn?: string,
  ): Promise<Worker> {
    if (runAbort.signal.aborted) throw new Error('run interrupted');
    const worker = new Worker(name, config, compiledIn);
    const ready = new Promise<void>((resolve) =>
      worker.#child.on('message', (m: ToParent) => m.type === 'ready' && resolve()),
    );
    try {
      await withTimeout(Promise.race([ready, worker.failure]), readyTimeoutMs, `${name} worker did not get ready`);
    } catch (err) {
      worker.kill();
      throw err;
    }
    return worker;
  }

  get pid(): number | undefined {
    return this.#child.pid;
  }

  /** Tells the worker to begin; resolves once it says it has (e.g. the consumer's subscription is live). */
  start(timeoutMs = 30_000): Promise<void> {
    const started = new Promise<void>((resolve) =>
      this.#child.on('message', (m: ToParent) => m.type === 'started' && resolve()),
    );
    this.#send({ type: 'start' });
    return withTimeout(Promise.race([started, this.failure]), timeoutMs, `${this.name} worker did not start`);
  }

  /** Asks the worker to stop and report; kills it if it does not within `timeoutMs`. */
  async stop(timeoutMs = 30_000): Promise<WorkerResult> {
    this.#stopping = true;
    this.#send({ type: 'stop' });
    const exited = new Promise<void>((resolve) =>
      this.#child.exitCode !== null ? resolve() : this.#child.once('exit', () => resolve()),
    );
    try {
      const result = await withTimeout(
        Promise.race([this.#result, this.failure]),
        timeoutMs,
        `${this.name} worker did not stop`,
      );
      await withTimeout(exited, 5000, `${this.name} worker did not exit`);
      return result;
    } catch (err) {
      this.kill();
      throw err;
    }
  }

  /**
   * Ends this one child (by its own pid, via the handle we spawned). Unless stop() asked for
   * the exit, `failure` rejects, so whoever waits on this worker stops waiting.
   */
  kill(): void {
    if (this.#child.exitCode === null && this.#child.signalCode === null) this.#child.kill('SIGKILL');
  }

  #send(message: ToChild): void {
    if (this.#child.connected) this.#child.send(message);
  }
}

/** A set of workers that a measurement stops (or, on failure, kills) together. */
export class WorkerGroup {
  readonly workers: Worker[] = [];

  add(worker: Worker): Worker {
    this.workers.push(worker);
    return worker;
  }

  get progress(): number {
    return this.workers.reduce((sum, w) => sum + w.progress, 0);
  }

  /** Rejects as soon as any worker fails. */
  get failure(): Promise<never> {
    return Promise.race(this.workers.map((w) => w.failure));
  }

  lastErrors(): string {
    const errors = this.workers.filter((w) => w.lastError).map((w) => `${w.name}: ${w.lastError}`);
    return errors.length ? `; worker errors: ${errors.join(' | ')}` : '';
  }

  /** Sends every start at once (a drain's clock starts here), then waits for all of them. */
  async startAll(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.start()));
  }

  async stopAll(): Promise<WorkerResult[]> {
    return Promise.all(this.workers.map((w) => w.stop()));
  }

  killAll(): void {
    for (const worker of this.workers) worker.kill();
  }
}

/**
 * Compiles the bench workers with src (tsc, the build's settings) into a directory inside the
 * repository, so their bare imports resolve from its node_modules; returns it. The caller removes it.
 */
export async function compileWorkers(): Promise<string> {
  const outDir = path.join(REPO_ROOT, '.bench', `compiled-${process.pid}`);
  await promisify(execFile)(
    process.execPath,
    [
      path.join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc'),
      '-p',
      'bench/tsconfig.compiled.json',
      '--outDir',
      outDir,
    ],
    { cwd: REPO_ROOT },
  );
  return outDir;
}
