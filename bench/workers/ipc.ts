/**
 * The child side of a worker process. Relay and consumer run in their own processes so that
 * their CPU use spreads over both cores like in production and their peak RSS is theirs
 * alone. Protocol: child → `ready` (after setup) → parent → `start` → child → `progress`… →
 * parent → `stop` → child → `result` (with maxRSS), then exit.
 */

import pg from 'pg';

/**
 * Statements this process sent to PostgreSQL since `start`: node-postgres sends each query and waits
 * for its answer, so this is also the number of round trips (the bound on what pipelining can save).
 * Every query of the process counts: pool.query goes through Client.prototype.query.
 */
let statements = 0;
let countingStatements = false;
const clientPrototype = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
const sendQuery = clientPrototype.query;
clientPrototype.query = function (this: pg.Client, ...args: unknown[]) {
  if (countingStatements) statements++;
  return sendQuery.apply(this, args);
};

export type ToParent =
  | { type: 'ready'; info: Record<string, unknown> }
  | { type: 'started' }
  | { type: 'progress'; count: number }
  | { type: 'error'; message: string }
  | { type: 'fatal'; message: string }
  | { type: 'result'; maxRssKb: number; data: Record<string, unknown> };

export type ToChild = { type: 'start' } | { type: 'stop' };

export interface WorkerBody {
  /** Shown in the report (effective options and the like). */
  info?: Record<string, unknown>;
  start(): Promise<void> | void;
  /** Stops everything and returns what the parent should know (counts, latency samples). */
  stop(): Promise<Record<string, unknown>>;
}

/** Common configuration every worker receives in the BENCH_WORKER environment variable. */
export interface BaseConfig {
  databaseUrl: string;
  amqpUrl: string;
  /** Count at which a progress report goes out at once instead of on the next tick. */
  target: number;
  /** Hard lifetime: a worker never outlives a stuck parent for long. */
  ttlMs: number;
}

export function readConfig<T extends BaseConfig>(): T {
  const raw = process.env.BENCH_WORKER;
  if (!raw) throw new Error('BENCH_WORKER is not set; workers are started by bench/run.ts');
  return JSON.parse(raw) as T;
}

function send(message: ToParent): Promise<void> {
  return new Promise((resolve) => {
    if (!process.send || !process.connected) return resolve();
    process.send(message, undefined, {}, () => resolve());
  });
}

export function reportError(err: unknown): void {
  void send({ type: 'error', message: err instanceof Error ? `${err.name}: ${err.message}` : String(err) });
}

/** Counts done work and tells the parent every 20 ms (cheap over IPC), and at once when the target is reached. */
export class Progress {
  #count = 0;
  #sent = 0;
  readonly #target: number;
  readonly #timer: NodeJS.Timeout;

  constructor(target: number) {
    this.#target = target;
    this.#timer = setInterval(() => this.#flush(), 20);
    this.#timer.unref();
  }

  get count(): number {
    return this.#count;
  }

  add(n: number): void {
    const before = this.#count;
    this.#count += n;
    if (before < this.#target && this.#count >= this.#target) this.#flush();
  }

  close(): void {
    clearInterval(this.#timer);
    this.#flush();
  }

  #flush(): void {
    if (this.#count === this.#sent) return;
    this.#sent = this.#count;
    void send({ type: 'progress', count: this.#count });
  }
}

export async function runWorker<T extends BaseConfig>(
  setup: (config: T, progress: Progress) => Promise<WorkerBody>,
): Promise<void> {
  const fail = async (err: unknown) => {
    await send({ type: 'fatal', message: err instanceof Error ? `${err.name}: ${err.message}` : String(err) });
    process.exit(1);
  };
  process.on('uncaughtException', (err) => void fail(err));
  process.on('unhandledRejection', (err) => void fail(err));
  // Without the parent there is nobody to report to: leave rather than run on.
  process.on('disconnect', () => process.exit(1));
  try {
    const config = readConfig<T>();
    setTimeout(() => void fail(new Error(`worker lifetime of ${config.ttlMs} ms exceeded`)), config.ttlMs).unref();
    const progress = new Progress(config.target);
    const body = await setup(config, progress);
    const commands = (message: ToChild) => {
      if (message.type === 'start') {
        countingStatements = true;
        Promise.resolve(body.start())
          .then(() => send({ type: 'started' }))
          .catch(fail);
      } else if (message.type === 'stop') {
        process.off('message', commands);
        body
          .stop()
          .then(async (data) => {
            progress.close();
            await send({ type: 'result', maxRssKb: process.resourceUsage().maxRSS, data: { ...data, statements } });
            process.exit(0);
          })
          .catch(fail);
      }
    };
    process.on('message', commands);
    await send({ type: 'ready', info: { ...body.info, rssMb: Math.round(process.memoryUsage().rss / 1048576) } });
  } catch (err) {
    await fail(err);
  }
}
