/**
 * The test kit: every test file imports `test`/`it`/`describe` and its services from here.
 *
 * - Each test runs in its own scope: every schema, broker name and pool made through the kit
 *   while it runs is recorded there and, when the test ends, its schemas, queues (with their
 *   `.retry` and `.dead` companions) and exchanges are dropped.
 * - With CONVERGE_KEEP_FAILED=1 a failed test keeps them instead and prints their names.
 * - After the file, it asserts that nothing this file created is left: no schema, queue or
 *   exchange (kept ones aside), no open pool or broker connection, no extra timer.
 * - Under CONVERGE_TEST_POOL_MODE=transaction (the pooler pass, `npm run test:pooler`: DATABASE_URL is
 *   a PgBouncer in transaction mode) converge's statements are not prepared by name.
 */
import assert from 'node:assert/strict';
import {
  after as nodeAfter,
  describe as nodeDescribe,
  it as nodeIt,
  test as nodeTest,
  type TestContext,
  type TestFn,
  type TestOptions,
} from 'node:test';
import type amqp from 'amqplib';
import amqplib from 'amqplib';
import pg from 'pg';
import { usePreparedStatements } from '../../src/index.js';
import { migrate } from '../../src/schema/migrate.js';
import { ConfirmPublisher } from '../../src/transport/publisher.js';
import type { TransportPublisher } from '../../src/transport/transport.js';
import {
  AMQP_URL,
  DATABASE_URL,
  Scope,
  connectPostgres,
  dropBrokerNames,
  dropSchemas,
  existingBrokerObjects,
  existingSchemas,
  registry,
  uniqueName,
} from '../../kit/services.js';

export { afterEach, before, beforeEach, mock } from 'node:test';
export * from '../../kit/services.js';
export * from '../../kit/broker-admin.js';
export * from './builders.js';

/** Set to keep the schema, queues and exchange of a failed test for inspection. */
export const KEEP_FAILED = process.env.CONVERGE_KEEP_FAILED === '1';

/**
 * 'transaction' in the pooler pass: DATABASE_URL is a PgBouncer in transaction mode, where the next
 * transaction may run on a server connection that never saw a statement prepared on another.
 */
/** CONVERGE_TEST_PARTITIONED=1: every test schema gets the partitioned outbox and inbox (npm run test:partitioned). */
export const PARTITIONED = process.env.CONVERGE_TEST_PARTITIONED === '1';

export const POOL_MODE = process.env.CONVERGE_TEST_POOL_MODE === 'transaction' ? 'transaction' : 'session';
if (POOL_MODE === 'transaction') usePreparedStatements(false);

// ---------------------------------------------------------------------------------------------
// Admin connections of the rig itself: not recorded, closed after the file.
// ---------------------------------------------------------------------------------------------

let adminPool: pg.Pool | undefined;
let adminBroker: amqp.ChannelModel | undefined;

function admin(): pg.Pool {
  if (!adminPool) {
    adminPool = new pg.Pool({ connectionString: DATABASE_URL, max: 1 });
    adminPool.on('error', () => undefined);
  }
  return adminPool;
}

async function broker(): Promise<amqp.ChannelModel> {
  if (!adminBroker) {
    adminBroker = await amqplib.connect(AMQP_URL);
    adminBroker.on('error', () => undefined);
  }
  return adminBroker;
}

const kept = new Set<string>();
let anyFailed = false;

async function drop(scope: Scope): Promise<void> {
  const names = [...scope.names].filter((name) => !kept.has(name));
  if (names.length === 0) return;
  await dropSchemas(admin(), names);
  await dropBrokerNames(await broker(), names);
}

async function keep(scope: Scope, label: string): Promise<void> {
  for (const name of scope.names) kept.add(name);
  const names = [...scope.names];
  const left = [
    ...(await existingSchemas(admin(), names)).map((s) => `schema ${s}`),
    ...(await existingBrokerObjects(await broker(), names)),
  ];
  process.stderr.write(
    `CONVERGE_KEEP_FAILED: "${label}" failed; kept ${left.length ? left.join(', ') : 'nothing (it created no schema, queue or exchange)'}\n`,
  );
}

/** Runs a test body in its own scope; drops what it made, or keeps it when it failed and KEEP_FAILED is set. */
export async function runScoped<T>(label: string, body: () => Promise<T> | T): Promise<T> {
  const scope = new Scope();
  let failed = false;
  try {
    return await registry.storage.run(scope, body);
  } catch (err) {
    failed = true;
    anyFailed = true;
    throw err;
  } finally {
    if (failed) for (const pool of scope.pools) if (!pool.ended) await pool.end().catch(() => undefined);
    await (failed && KEEP_FAILED ? keep(scope, label) : drop(scope)).catch((err: unknown) => {
      process.stderr.write(`test rig: cleanup after "${label}" failed: ${(err as Error).message}\n`);
    });
  }
}

/** node:test's options without the ones that skip: a test here never skips (nor narrows a run to `only`). */
type RunOptions = Omit<TestOptions, 'skip' | 'todo' | 'only'>;

/**
 * node:test's call signatures without `.skip`/`.todo`/`.only` and without those options. They
 * return void because node:test itself awaits the test; nothing here should.
 */
interface Runner {
  (name?: string, fn?: TestFn): void;
  (name?: string, options?: RunOptions, fn?: TestFn): void;
  (options?: RunOptions, fn?: TestFn): void;
  (fn?: TestFn): void;
}

/** node:test's describe, likewise without a way to skip. */
interface SuiteRunner {
  (name: string, fn: () => void): void;
  (name: string, options: RunOptions, fn: () => void): void;
}

function scoped(base: typeof nodeTest): Runner {
  const wrapped = (...args: unknown[]) => {
    const at = args.findIndex((arg) => typeof arg === 'function');
    if (at >= 0) {
      const body = args[at] as (this: unknown, t: TestContext) => unknown;
      args[at] = function (this: unknown, t: TestContext) {
        return runScoped(t.name, () => body.call(this, t));
      };
    }
    return (base as (...a: unknown[]) => unknown)(...args);
  };
  return wrapped as Runner;
}

export const test: Runner = scoped(nodeTest);
export const it: Runner = scoped(nodeIt);

// ---------------------------------------------------------------------------------------------
// The leak check, after every file that imports the kit.
// ---------------------------------------------------------------------------------------------

const timers = () => process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length;
const timersAtStart = timers();

// A file's top-level after hooks (closing its own pools) must run before the check, so the rig
// collects them and runs them itself; after hooks inside a describe go to node:test as usual.
let suiteDepth = 0;
const fileAfterHooks: (() => unknown)[] = [];

export const describe: SuiteRunner = (...args: unknown[]): void => {
  const at = args.findIndex((arg) => typeof arg === 'function');
  if (at >= 0) {
    const body = args[at] as (...a: unknown[]) => unknown;
    args[at] = function (this: unknown, ...a: unknown[]) {
      suiteDepth++;
      try {
        return body.apply(this, a);
      } finally {
        suiteDepth--;
      }
    };
  }
  void (nodeDescribe as (...a: unknown[]) => unknown)(...args);
};

export function after(fn: () => unknown): void {
  if (suiteDepth > 0) nodeAfter(fn);
  else fileAfterHooks.push(fn);
}

nodeAfter(async () => {
  for (const hook of fileAfterHooks) await hook();
  await checkLeaks();
});

async function checkLeaks(): Promise<void> {
  const problems: string[] = [];
  try {
    await (anyFailed && KEEP_FAILED ? keep(registry.process, 'a hook of this file') : drop(registry.process));
    const names = [...registry.all.names].filter((name) => !kept.has(name));
    const openPools = [...registry.all.pools].filter((pool) => !pool.ended);
    for (const pool of openPools) await pool.end().catch(() => undefined);
    const openConnections = [...registry.all.connections].filter((connection) => !closed.has(connection));
    for (const connection of openConnections) await connection.close().catch(() => undefined);
    if (names.length > 0) {
      for (const schema of await existingSchemas(admin(), names)) problems.push(`schema ${schema} is left`);
      for (const object of await existingBrokerObjects(await broker(), names)) problems.push(`${object} is left`);
    }
    if (openPools.length > 0) problems.push(`${openPools.length} pool(s) opened through the rig were not ended`);
    if (openConnections.length > 0)
      problems.push(`${openConnections.length} broker connection(s) opened through the rig were not closed`);
  } finally {
    await adminPool?.end().catch(() => undefined);
    await adminBroker?.close().catch(() => undefined);
  }
  // A timer about to fire is not a leak; one still pending after this wait is.
  const deadline = Date.now() + 5_000;
  while (timers() > timersAtStart && Date.now() < deadline) await new Promise((resolve) => setImmediate(resolve));
  if (timers() > timersAtStart)
    problems.push(
      `${timers() - timersAtStart} timer(s) left behind (${timers()} active, ${timersAtStart} at the start of the file)`,
    );
  assert.deepEqual(problems, [], `test rig leak check: ${problems.join('; ')}`);
}

const closed = new WeakSet<amqp.ChannelModel>();
const record = registry.connection.bind(registry);
registry.connection = (connection: amqp.ChannelModel) => {
  connection.on('close', () => closed.add(connection));
  record(connection);
};

// ---------------------------------------------------------------------------------------------
// Databases and waiting.
// ---------------------------------------------------------------------------------------------

export interface TestDatabase {
  pool: pg.Pool;
  schema: string;
  /** Ends the pool; drops the schema unless a failed test may keep it (the rig drops it then). */
  close(): Promise<void>;
}

/** A freshly migrated, uniquely named converge schema, dropped again by `close()` (or by the rig). */
export async function createTestSchema(prefix = 'cvt', max = 10): Promise<TestDatabase> {
  const pool = await connectPostgres(max);
  const schema = uniqueName(prefix);
  await migrate(pool, { schema, ...(PARTITIONED ? { partitioned: true as const } : {}) });
  return {
    pool,
    schema,
    async close() {
      if (!KEEP_FAILED) await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await pool.end();
    },
  };
}

/** Polls a condition until it holds; fails with `description` after `timeoutMs`. */
export async function waitFor<T>(
  condition: () => Promise<T | undefined | false> | T | undefined | false,
  description: string,
  timeoutMs = 15_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await condition();
      if (value !== undefined && value !== false) return value;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${description}${lastError ? ` (last error: ${(lastError as Error).message})` : ''}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Outcome of a promise without letting a rejection go unhandled while we wait for something else. */
export function settle<T>(promise: Promise<T>): Promise<{ ok: true; value: T } | { ok: false; error: unknown }> {
  return promise.then(
    (value) => ({ ok: true as const, value }),
    (error: unknown) => ({ ok: false as const, error }),
  );
}

export async function backendPid(client: pg.PoolClient): Promise<number> {
  const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  return rows[0]!.pid;
}

/** True once `pid` is waiting on a heavyweight lock (row/transaction lock), seen both ways. */
export async function isBlockedOnLock(pool: pg.Pool, pid: number): Promise<boolean> {
  const activity = await pool.query<{ wait_event_type: string | null }>(
    `SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1`,
    [pid],
  );
  if (activity.rows[0]?.wait_event_type !== 'Lock') return false;
  const locks = await pool.query(`SELECT 1 FROM pg_locks WHERE pid = $1 AND NOT granted`, [pid]);
  return (locks.rowCount ?? 0) > 0;
}

/**
 * A test's own broker teardown: deletes the queues (with `.retry` and `.dead`) and exchanges named `names`
 * now, or, under CONVERGE_KEEP_FAILED, leaves them to the rig, which drops them only if the test passed.
 */
export async function dropTestBroker(connection: amqp.ChannelModel, names: Iterable<string>): Promise<void> {
  if (!KEEP_FAILED) await dropBrokerNames(connection, names);
}

/** RabbitMQ's TransportPublisher on a confirm channel of its own on `connection` (closed with it), e.g. for replayQuarantined. */
export async function openConfirmPublisher(connection: amqp.ChannelModel): Promise<TransportPublisher> {
  return new ConfirmPublisher(await connection.createConfirmChannel());
}
