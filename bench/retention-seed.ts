/**
 * The two schemas retention is measured on, each holding N published outbox rows and N inbox rows
 * spread over ten past days (8 to 17 days old, so a 7-day retention covers all of them):
 * the plain layout, and the partitioned one with those rows in daily partitions of their own.
 */
import type pg from 'pg';
import { migrate } from '../src/index.js';
import { quoteIdentifier, schemaRef } from '../src/runtime/identifier.js';
import { ensurePartitions } from '../src/schema/partitioning.js';
import { checkpoint, note, unique, withTimeout, type BenchContext } from './env.js';

export type Layout = 'plain' | 'partitioned';

export const DAY_MS = 86_400_000;
/** Rows cover days [today − OLDEST_DAY, today − OLDEST_DAY + SPAN_DAYS). */
const OLDEST_DAY = 17;
const SPAN_DAYS = 10;
const CHUNK = 1_000_000;
const VERSIONS = 10;
export const INBOX_CONSUMER = 'bench_ret';

/**
 * Key-ordered ids, as in history.ts: sequential B-tree inserts seed several times faster than
 * random UUIDs, and retention reads the rows by age, not by id.
 */
const EVENT_ID = `'00000000-0000-4000-8000-' || lpad(to_hex(i), 12, '0')`;
const AGGREGATE_ID = `'r' || lpad((i / $3)::text, 8, '0')`;
/** Row i's time: evenly spread from $4 over the span ($5 ms per row). */
const AT = `($4::timestamptz + (i * $5::float8) * interval '1 millisecond')`;

function outboxSeed(s: string, layout: Layout): string {
  // Only the partitioned outbox has created_at (its partition key), added by the conversion.
  const [column, value] = layout === 'partitioned' ? [', created_at', `, ${AT}`] : ['', ''];
  return `INSERT INTO ${s}.outbox (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload,
                                   occurred_at, status, published_at${column})
    SELECT ${EVENT_ID}, 'order', ${AGGREGATE_ID}, i % $3 + 1, 'AmountAdded', '{"delta":1}'::jsonb,
           ${AT}, 'published', ${AT} + interval '1 second'${value}
      FROM generate_series($1::bigint, $2::bigint) AS i`;
}

function inboxSeed(s: string): string {
  return `INSERT INTO ${s}.inbox (consumer, event_id, fingerprint, aggregate_type, aggregate_id, aggregate_version, event_type, received_at)
    SELECT '${INBOX_CONSUMER}', ${EVENT_ID}, md5(i::text) || md5((i + 1)::text), 'order', ${AGGREGATE_ID}, i % $3 + 1, 'AmountAdded', ${AT}
      FROM generate_series($1::bigint, $2::bigint) AS i`;
}

/**
 * One table in chunks of 1M on a connection of its own (progress shows, no transaction grows
 * huge), then vacuumed as autovacuum would have done long before retention comes for the rows.
 */
async function seedTable(
  pool: pg.Pool,
  layout: Layout,
  table: string,
  rows: number,
  statement: string,
  startIso: string,
  timeoutMs: number,
): Promise<void> {
  const stepMs = (SPAN_DAYS * DAY_MS - 1000) / rows;
  const client = await pool.connect();
  try {
    // A seed that overruns is cancelled by the server rather than left holding locks that would block the schema's drop.
    await client.query(`SET statement_timeout = ${Math.ceil(timeoutMs)}`);
    // The partitioned parent's per-row trigger looks for the same key in every partition under an
    // advisory lock; these rows are unique by construction, so the seed skips it (superuser only).
    if (layout === 'partitioned') await client.query('SET session_replication_role = replica');
    for (let from = 0; from < rows; from += CHUNK) {
      const to = Math.min(rows, from + CHUNK);
      await client.query(statement, [from, to - 1, VERSIONS, startIso, stepMs]);
      note(`retention: ${layout} ${table} ${to.toLocaleString('en-US')}/${rows.toLocaleString('en-US')}`);
    }
    await client.query(`VACUUM (ANALYZE) ${table}`);
  } finally {
    await client.query('RESET statement_timeout; RESET session_replication_role').catch(() => undefined);
    client.release();
  }
}

/**
 * Daily partitions for the seeded days. migrate's conversion leaves `<table>_legacy` covering
 * everything up to the end of today; on this fresh schema it is empty and dropped, so past days can
 * have partitions of their own, as they would on a schema partitioned from the start.
 */
async function pastPartitions(pool: pg.Pool, schema: string, todayMs: number): Promise<void> {
  const s = quoteIdentifier(schema);
  await pool.query(`DROP TABLE ${s}.outbox_legacy, ${s}.inbox_legacy`);
  const ref = schemaRef(schema);
  for (let day = OLDEST_DAY; day > OLDEST_DAY - SPAN_DAYS; day--)
    await ensurePartitions(pool, ref, todayMs - day * DAY_MS);
  await ensurePartitions(pool, ref);
}

/** Creates, migrates and seeds one schema; its drop is registered before it exists. */
export async function createRetentionSchema(
  ctx: BenchContext,
  layout: Layout,
  rows: number,
  timeoutMs: number,
): Promise<string> {
  const schema = unique(layout === 'plain' ? 'bench_ret_plain' : 'bench_ret_part');
  const s = quoteIdentifier(schema);
  ctx.cleanup.add(`drop schema ${schema}`, () => ctx.pool.query(`DROP SCHEMA IF EXISTS ${s} CASCADE`));
  const { rows: now } = await ctx.pool.query<{ ms: number }>(
    `SELECT extract(epoch FROM date_trunc('day', now() AT TIME ZONE 'UTC'))::float8 * 1000 AS ms`,
  );
  const todayMs = Number(now[0]!.ms);
  if (layout === 'plain') await migrate(ctx.pool, { schema });
  else {
    await migrate(ctx.pool, { schema, partitioned: { intervalMs: DAY_MS, ahead: 2 } });
    await pastPartitions(ctx.pool, schema, todayMs);
  }
  const startIso = new Date(todayMs - OLDEST_DAY * DAY_MS).toISOString();
  const started = performance.now();
  await withTimeout(
    Promise.all([
      seedTable(ctx.pool, layout, `${s}.outbox`, rows, outboxSeed(s, layout), startIso, timeoutMs),
      seedTable(ctx.pool, layout, `${s}.inbox`, rows, inboxSeed(s), startIso, timeoutMs),
    ]),
    timeoutMs,
    `seeding ${rows.toLocaleString('en-US')} outbox and inbox rows (${layout})`,
  );
  await checkpoint(ctx.pool);
  note(`retention: ${layout} seeded and vacuumed in ${((performance.now() - started) / 1000).toFixed(0)} s`);
  return schema;
}
