/**
 * A schema that looks like a service after months of traffic: 5M published outbox rows and
 * 5M inbox rows, seeded set-based in SQL (chunks of 1M so progress shows and no single
 * transaction grows huge), the two tables in parallel on two connections, then vacuumed as
 * autovacuum would have done long ago.
 */
import type pg from 'pg';
import { migrate } from '../src/index.js';
import { quoteIdentifier } from '../src/runtime/identifier.js';
import { createReadTable } from './converge.js';
import { checkpoint, note, unique, withTimeout, type BenchContext } from './env.js';

export const HISTORY_CONSUMER = 'bench_hist';
const CHUNK = 1_000_000;
/** Versions per history aggregate (5M rows → 500k aggregates of their own, `h…`; measured events use other ids). */
const VERSIONS = 10;
/**
 * Rows are generated in key order (UUID-shaped but ascending event ids, aggregate-major
 * versions), which makes the B-tree inserts sequential and the seed ~3× faster than random
 * UUIDs. What the measurement feels is the size of those indexes: its own random UUIDs still
 * land on random leaves of a 5M-entry index, as in production.
 */
const HISTORY_EVENT_ID = `'00000000-0000-4000-8000-' || lpad(to_hex(i), 12, '0')`;
const HISTORY_AGGREGATE_ID = `'h' || lpad((i / $3)::text, 8, '0')`;

/**
 * Runs on a connection of its own with a statement_timeout: a seed that overruns is cancelled
 * by the server rather than left holding locks that would block the schema's drop.
 */
async function inChunks(
  pool: pg.Pool,
  timeoutMs: number,
  table: string,
  total: number,
  statement: string,
  extra: unknown[] = [],
): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query(`SET statement_timeout = ${Math.ceil(timeoutMs)}`);
    for (let from = 0; from < total; from += CHUNK) {
      const to = Math.min(total, from + CHUNK);
      await client.query(statement, [from, to - 1, VERSIONS, ...extra]);
      note(`history: ${table} ${to.toLocaleString('en-US')}/${total.toLocaleString('en-US')}`);
    }
    await client.query(`VACUUM (ANALYZE) ${table}`);
  } finally {
    await client.query('RESET statement_timeout').catch(() => undefined);
    client.release();
  }
}

/** Creates, migrates and seeds the history schema; its drop is registered before it exists. */
export async function createHistorySchema(ctx: BenchContext, rows: number, timeoutMs: number): Promise<string> {
  const schema = unique('bench_hist');
  const s = quoteIdentifier(schema);
  ctx.cleanup.add(`drop schema ${schema}`, () => ctx.pool.query(`DROP SCHEMA IF EXISTS ${s} CASCADE`));
  await migrate(ctx.pool, { schema });
  await createReadTable(ctx.pool, schema);
  const started = performance.now();
  const seed = Promise.all([
    inChunks(
      ctx.pool,
      timeoutMs,
      `${s}.outbox`,
      rows,
      `INSERT INTO ${s}.outbox (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload, status, published_at)
       SELECT ${HISTORY_EVENT_ID}, 'order', ${HISTORY_AGGREGATE_ID}, i % $3 + 1, 'AmountAdded', '{"delta":1}'::jsonb, 'published', now()
         FROM generate_series($1::bigint, $2::bigint) AS i`,
    ),
    inChunks(
      ctx.pool,
      timeoutMs,
      `${s}.inbox`,
      rows,
      `INSERT INTO ${s}.inbox (consumer, event_id, fingerprint, aggregate_type, aggregate_id, aggregate_version, event_type)
       SELECT $4, ${HISTORY_EVENT_ID}, md5(i::text) || md5((i + 1)::text), 'order', ${HISTORY_AGGREGATE_ID}, i % $3 + 1, 'AmountAdded'
         FROM generate_series($1::bigint, $2::bigint) AS i`,
      [HISTORY_CONSUMER],
    ),
  ]);
  await withTimeout(
    seed,
    timeoutMs + 5000,
    `seeding and vacuuming ${rows.toLocaleString('en-US')} history rows (PostgreSQL)`,
  );
  await checkpoint(ctx.pool);
  note(`history: seeded and vacuumed in ${((performance.now() - started) / 1000).toFixed(0)} s`);
  return schema;
}
