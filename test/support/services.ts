import assert from 'node:assert/strict';
import { after } from 'node:test';
import { randomBytes } from 'node:crypto';
import amqp from 'amqplib';
import pg from 'pg';
import { migrate } from '../../src/index.js';

export const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
export const AMQP_URL = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';

const PG_HINT = 'start it with: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start (or set DATABASE_URL)';
const AMQP_HINT = 'start it with: rabbitmq-server -detached (or set AMQP_URL)';

/** A short random suffix so concurrent runs never share a schema, exchange or queue. */
export function uniqueName(prefix: string): string {
  return `${prefix}_${Date.now().toString(36)}_${randomBytes(4).toString('hex')}`;
}

/** Opens a pool and proves the server answers; a missing service fails the test with how to start it. */
export async function connectPostgres(max = 5): Promise<pg.Pool> {
  const pool = new pg.Pool({ connectionString: DATABASE_URL, max, connectionTimeoutMillis: 5000 });
  pool.on('error', () => undefined);
  try {
    await pool.query('SELECT 1');
  } catch (err) {
    await pool.end().catch(() => undefined);
    throw new Error(`PostgreSQL is not reachable (${(err as Error).message}); ${PG_HINT}`);
  }
  return pool;
}

export async function connectRabbit(): Promise<amqp.ChannelModel> {
  try {
    return await amqp.connect(AMQP_URL);
  } catch (err) {
    throw new Error(`RabbitMQ is not reachable (${(err as Error).message}); ${AMQP_HINT}`);
  }
}

export interface TestDatabase {
  pool: pg.Pool;
  schema: string;
  close(): Promise<void>;
}

/** A freshly migrated, uniquely named converge schema, dropped again by `close()`. */
export async function createTestSchema(prefix = 'cvt'): Promise<TestDatabase> {
  const pool = await connectPostgres(10);
  const schema = uniqueName(prefix);
  await migrate(pool, { schema });
  return {
    pool,
    schema,
    async close() {
      await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
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
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${description}${lastError ? ` (last error: ${(lastError as Error).message})` : ''}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/**
 * A list to push every schema a test file creates into; after the file's tests it asserts
 * that none of them is left, so a missing cleanup fails loudly.
 */
export function trackCreatedSchemas(): string[] {
  const created: string[] = [];
  after(async () => {
    const pool = await connectPostgres(1);
    try {
      const { rows } = await pool.query<{ nspname: string }>(`SELECT nspname FROM pg_namespace WHERE nspname = ANY($1::text[])`, [created]);
      assert.deepEqual(rows, [], 'every test schema is dropped again');
    } finally {
      await pool.end();
    }
  });
  return created;
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
  const activity = await pool.query<{ wait_event_type: string | null }>(`SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1`, [pid]);
  if (activity.rows[0]?.wait_event_type !== 'Lock') return false;
  const locks = await pool.query(`SELECT 1 FROM pg_locks WHERE pid = $1 AND NOT granted`, [pid]);
  return (locks.rowCount ?? 0) > 0;
}
