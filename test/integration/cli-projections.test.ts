/** The CLI from the shell: gaps, reconcile and rebuild. (cli.test.ts split so each file stays well inside the per-file timeout.) */
import assert from 'node:assert/strict';
import { cli, cliSchema } from '../support/cli.js';
import { test } from '../support/rig.js';

const { schema, pool: testPool } = cliSchema();

test('gaps lists aggregates stuck on a missing version as a table or JSON, and exits 3 while any is open', async () => {
  const migrated = await cli(['--schema', schema, 'migrate']);
  assert.equal(migrated.code, 0, migrated.stderr);
  const clean = await cli(['--schema', schema, 'gaps']);
  assert.deepEqual([clean.code, clean.stdout.trim()], [0, 'no gaps']);
  await testPool().query(
    `INSERT INTO "${schema}".parked (consumer, event_id, fingerprint, projection, aggregate_type, aggregate_id, aggregate_version, waiting_for, properties, body, parked_at)
     VALUES ('search', 'e5', 'f5', 'order_view', 'order', 'o-7', 5, 4, '{}', '\\x00', now() - interval '1 minute'),
            ('search', 'e6', 'f6', 'order_view', 'order', 'o-7', 6, 4, '{}', '\\x00', now())`,
  );
  await testPool().query(
    `INSERT INTO "${schema}".projection_state (projection, aggregate_type, aggregate_id, version) VALUES ('order_view', 'order', 'o-7', 3)`,
  );
  const table = await cli(['--schema', schema, 'gaps']);
  assert.equal(table.code, 3, table.stderr);
  assert.match(table.stdout, /search\s+order_view\s+order\/o-7\s+3\s+4\s+5,6\s+6\d\.\d s/);
  const json = await cli(['--schema', schema, 'gaps', '--json', '--older-than', '30000']);
  const [gap] = JSON.parse(json.stdout) as {
    aggregateId: string;
    currentVersion: number;
    missingVersion: number;
    parkedVersions: number[];
    ageMs: number;
  }[];
  assert.deepEqual(
    [gap?.aggregateId, gap?.currentVersion, gap?.missingVersion, gap?.parkedVersions],
    ['o-7', 3, 4, [5, 6]],
  );
  assert.ok(gap!.ageMs >= 60_000);
  const recentOnly = await cli(['--schema', schema, 'gaps', '--json', '--older-than', '3600000']);
  assert.deepEqual([recentOnly.code, JSON.parse(recentOnly.stdout)], [0, []]);
});

test('reconcile reports differences (exit 4), repairs them with --repair --apply-sql, and then finds none (exit 0)', async () => {
  const migrated = await cli(['--schema', schema, 'migrate']);
  assert.equal(migrated.code, 0, migrated.stderr);
  const q = `"${schema}"`;
  await testPool().query(
    `CREATE TABLE ${q}.src (id text PRIMARY KEY, version bigint NOT NULL, amount integer NOT NULL)`,
  );
  await testPool().query(`CREATE TABLE ${q}.view (id text PRIMARY KEY, amount integer NOT NULL)`);
  await testPool().query(`INSERT INTO ${q}.src VALUES ('a', 2, 20), ('b', 3, 30), ('c', 1, 10)`);
  await testPool().query(`INSERT INTO ${q}.view VALUES ('a', 20), ('b', 25), ('c', 11)`);
  await testPool().query(
    `INSERT INTO ${q}.projection_state (projection, aggregate_type, aggregate_id, version) VALUES ('v', 'order', 'a', 2), ('v', 'order', 'b', 2), ('v', 'order', 'c', 1)`,
  );
  await testPool().query(`INSERT INTO ${q}.src VALUES ('d', 4, 40)`);
  await testPool().query(`INSERT INTO ${q}.view VALUES ('x', 1)`);
  await testPool().query(
    `INSERT INTO ${q}.projection_state (projection, aggregate_type, aggregate_id, version) VALUES ('v', 'order', 'x', 1)`,
  );
  const args = [
    '--schema',
    schema,
    'reconcile',
    '--projection',
    'v',
    '--aggregate-type',
    'order',
    '--page-size',
    '2',
    '--source-sql',
    `SELECT id, version, amount FROM ${q}.src WHERE id COLLATE "C" > $1 ORDER BY id COLLATE "C" LIMIT $2`,
    '--target-sql',
    `SELECT s.aggregate_id AS id, s.version, v.amount FROM ${q}.projection_state s JOIN ${q}.view v ON v.id = s.aggregate_id WHERE s.projection = 'v' AND s.aggregate_id COLLATE "C" > $1 ORDER BY s.aggregate_id COLLATE "C" LIMIT $2`,
  ];
  const found = await cli([...args, '--json']);
  assert.equal(found.code, 4, found.stderr);
  const report = JSON.parse(found.stdout) as { differences: Record<string, number>; samples: Record<string, string[]> };
  assert.deepEqual(report.differences, { missing: 1, stale: 1, ahead: 0, mismatch: 1, extra: 1 });
  assert.deepEqual([report.samples.missing, report.samples.stale, report.samples.mismatch], [['d'], ['b'], ['c']]);

  const repaired = await cli([
    ...args,
    '--repair',
    '--apply-sql',
    `INSERT INTO ${q}.view (id, amount) VALUES ($1, ($3::jsonb->>'amount')::int) ON CONFLICT (id) DO UPDATE SET amount = EXCLUDED.amount`,
    '--lookup-sql',
    `SELECT id, version, amount FROM ${q}.src WHERE id = $1`,
    '--remove-sql',
    `DELETE FROM ${q}.view WHERE id = $1`,
  ]);
  assert.equal(repaired.code, 0, repaired.stderr);
  assert.match(repaired.stdout, /repaired 4, skipped 0/);
  const clean = await cli(args);
  assert.equal(clean.code, 0, clean.stderr);
  assert.match(clean.stdout, /missing\s+0\n/);
  const { rows } = await testPool().query(`SELECT id, amount FROM ${q}.view ORDER BY id`);
  assert.deepEqual(rows, [
    { id: 'a', amount: 20 },
    { id: 'b', amount: 30 },
    { id: 'c', amount: 10 },
    { id: 'd', amount: 40 },
  ]);

  const refused = await cli([...args, '--repair']);
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, /CONVERGE_INVALID_CONFIG.*apply-sql/);
});

test('rebuild forgets and empties a projection, then writes every source row at its version', async () => {
  const migrated = await cli(['--schema', schema, 'migrate']);
  assert.equal(migrated.code, 0, migrated.stderr);
  const q = `"${schema}"`;
  await testPool().query(
    `CREATE TABLE ${q}.rb_src (id text PRIMARY KEY, version bigint NOT NULL, amount integer NOT NULL)`,
  );
  await testPool().query(`CREATE TABLE ${q}.rb_view (id text PRIMARY KEY, amount integer NOT NULL)`);
  await testPool().query(`INSERT INTO ${q}.rb_src VALUES ('a', 5, 50), ('b', 2, 20)`);
  await testPool().query(`INSERT INTO ${q}.rb_view VALUES ('a', 1), ('zombie', 7)`);
  await testPool().query(
    `INSERT INTO ${q}.projection_state (projection, aggregate_type, aggregate_id, version) VALUES ('rb', 'order', 'a', 1), ('rb', 'order', 'zombie', 9), ('other', 'order', 'a', 4)`,
  );
  const result = await cli([
    '--schema',
    schema,
    'rebuild',
    '--projection',
    'rb',
    '--aggregate-type',
    'order',
    '--source-sql',
    `SELECT id, version, amount FROM ${q}.rb_src WHERE id COLLATE "C" > $1 ORDER BY id COLLATE "C" LIMIT $2`,
    '--apply-sql',
    `INSERT INTO ${q}.rb_view (id, amount) SELECT id, (fields->>'amount')::int FROM converge_row`,
    '--reset-sql',
    `TRUNCATE ${q}.rb_view`,
  ]);
  assert.equal(result.code, 0, result.stderr);
  assert.match(result.stdout, /rebuilt rb: 2 aggregates written/);
  assert.deepEqual((await testPool().query(`SELECT id, amount FROM ${q}.rb_view ORDER BY id`)).rows, [
    { id: 'a', amount: 50 },
    { id: 'b', amount: 20 },
  ]);
  const state = await testPool().query(
    `SELECT projection, aggregate_id, version FROM ${q}.projection_state WHERE projection IN ('rb', 'other') ORDER BY projection, aggregate_id`,
  );
  assert.deepEqual(
    state.rows,
    [
      { projection: 'other', aggregate_id: 'a', version: '4' },
      { projection: 'rb', aggregate_id: 'a', version: '5' },
      { projection: 'rb', aggregate_id: 'b', version: '2' },
    ],
    'other projections untouched',
  );
});
