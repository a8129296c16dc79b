/**
 * `npx tsx bench/claim-plan.ts [ROWS] [pinned]`: the relay's claim scan with and without a pinned
 * xmin horizon (issue 29, docs/performance.md "Vacuum pressure"). Writes ROWS outbox rows, claims and
 * marks them as the lease relay does (two row writes each, in batches), then EXPLAINs the claim's
 * scan for the one pending row left, from the start of the index and from the relay's floor: after a
 * VACUUM when unpinned, with a REPEATABLE READ transaction held open since before the first write when
 * `pinned`. Removes its schema at the end.
 */
import pg from 'pg';
import { migrate } from '../src/index.js';
import { relaySql } from '../src/relay/sql.js';
import { quoteIdentifier, schemaRef } from '../src/runtime/identifier.js';
import { assertLoopback, DATABASE_URL, unique } from './env.js';

const rows = Number(process.argv[2] ?? 300_000);
const pinned = process.argv[3] === 'pinned';
assertLoopback();
const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
const schema = unique('bench_claim_plan');
const outbox = `${quoteIdentifier(schema)}.outbox`;
const holder = await pool.connect();
try {
  await migrate(pool, { schema });
  if (pinned) {
    await holder.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
    await holder.query('SELECT 1');
  }
  await pool.query(
    `INSERT INTO ${outbox} (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
     SELECT 'e' || g, 'order', 'o' || (g % 1000), g / 1000 + 1, 'OrderChanged', '{}' FROM generate_series(1, $1::int) g`,
    [rows],
  );
  for (let low = 1; low <= rows; low += 10_000) {
    const range = [low, low + 9_999];
    await pool.query(
      `UPDATE ${outbox} SET claimed_by = 'bench', claim_expires_at = now() + interval '1 minute' WHERE position BETWEEN $1 AND $2`,
      range,
    );
    await pool.query(
      `UPDATE ${outbox} SET status = 'published', published_at = now(), claimed_by = NULL WHERE position BETWEEN $1 AND $2`,
      range,
    );
  }
  if (!pinned) await pool.query(`VACUUM ${outbox}`);
  await pool.query(
    `INSERT INTO ${outbox} (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
     VALUES ('last', 'order', 'new', 1, 'OrderChanged', '{}')`,
  );
  // selectDue has the lease claim's WHERE and ORDER BY without its write, so EXPLAIN ANALYZE changes
  // nothing. A full scan starts at position 0; the relay's other claims start at its floor
  // (src/relay/claim-floor.ts), here just above the last row it claimed.
  for (const [label, floor] of [
    ['full scan', '0'],
    ['from the floor', String(rows + 1)],
  ] as const) {
    const plan = await pool.query<{ 'QUERY PLAN': string }>(
      `EXPLAIN (ANALYZE, BUFFERS, TIMING OFF) ${relaySql(schemaRef(schema)).selectDue}`,
      [500, [], floor],
    );
    console.log(`${pinned ? 'horizon pinned' : 'unpinned, after VACUUM'}, ${rows} rows claimed and marked, ${label}:`);
    for (const row of plan.rows) console.log(`  ${row['QUERY PLAN']}`);
  }
} finally {
  if (pinned) await holder.query('ROLLBACK').catch(() => undefined);
  holder.release();
  await pool.query(`DROP SCHEMA IF EXISTS ${quoteIdentifier(schema)} CASCADE`);
  await pool.end();
}
