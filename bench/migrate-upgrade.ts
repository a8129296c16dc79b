/**
 * How long migration 17 takes on a large outbox (docs/operations.md quotes it):
 *   npx tsx bench/migrate-upgrade.ts [rows]     (default 1,000,000; DATABASE_URL or the local test database)
 * Builds a schema at migration 16 with `rows` outbox rows (99% published, 1% pending, 10 pending
 * rows breaking a rule under the NOT VALID checks, as an old release could leave them), runs
 * migrate(), prints the time it took and what it did, and drops the schema.
 */
import pg from 'pg';
import { migrate } from '../src/schema/migrate.js';
import { outboxBlankChecks, outboxEnvelopeChecks } from '../src/schema/outbox-checks.js';
import { migrateTo } from '../test/support/migrate-to.js';

const rows = Number(process.argv[2] ?? 1_000_000);
const pool = new pg.Pool({
  connectionString: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
  max: 2,
});
const schema = `bench_upgrade_${Date.now().toString(36)}`;
const outbox = `"${schema}".outbox`;
const checks = [...outboxEnvelopeChecks(), ...outboxBlankChecks()];

try {
  await migrateTo(pool, schema, 16);
  await pool.query(`ALTER TABLE ${outbox} ${checks.map(([name]) => `DROP CONSTRAINT ${name}`).join(', ')}`);
  const seeded = performance.now();
  await pool.query(
    `INSERT INTO ${outbox} (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload, status, published_at)
     SELECT 'ev-' || i, 'order', 'o-' || (i % 10000), i / 10000 + 1, CASE WHEN i % 100000 = 7 THEN 'Order Paid' ELSE 'OrderPaid' END,
            jsonb_build_object('amount', i, 'note', 'some text of an ordinary payload'),
            CASE WHEN i > $1 * 0.99 OR i % 100000 = 7 THEN 'pending' ELSE 'published' END,
            CASE WHEN i > $1 * 0.99 OR i % 100000 = 7 THEN NULL ELSE now() END
       FROM generate_series(1, $1::int) AS i`,
    [rows],
  );
  await pool.query(
    `ALTER TABLE ${outbox} ${checks.map(([name, check]) => `ADD CONSTRAINT ${name} CHECK (${check}) NOT VALID`).join(', ')}`,
  );
  await pool.query(`VACUUM ANALYZE ${outbox}`);
  console.error(`seeded ${rows} rows in ${Math.round(performance.now() - seeded)} ms`);
  const started = performance.now();
  const result = await migrate(pool, { schema });
  const ms = Math.round(performance.now() - started);
  const { rows: counts } = await pool.query<{ status: string; n: string }>(
    `SELECT status, count(*) AS n FROM ${outbox} GROUP BY status ORDER BY status`,
  );
  console.log(
    `migrate ${JSON.stringify(result.applied)} on ${rows} outbox rows: ${ms} ms; ${counts.map((c) => `${c.n} ${c.status}`).join(', ')}`,
  );
} finally {
  await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await pool.end();
}
