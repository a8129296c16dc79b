import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { InvalidIdentifierError, SchemaTooNewError } from '../../src/runtime/errors.js';
import { type MigrateResult, migrate, migrationSql } from '../../src/schema/migrate.js';
import { LATEST_MIGRATION, migrations } from '../../src/schema/migrations.js';
import { schemaRef } from '../../src/runtime/identifier.js';
import { after, before, describe, it, DATABASE_URL, connectPostgres, uniqueName, waitFor } from '../support/rig.js';

const CONVERGE_TABLES = [
  'consumer_schemas',
  'effects',
  'header_key',
  'inbox',
  'inbox_watermark',
  'migrations',
  'outbox',
  'parked',
  'projection_state',
  'quarantine',
];
const MIGRATE_MODULE = fileURLToPath(new URL('../../src/schema/migrate.ts', import.meta.url));
const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));

let admin: pg.Pool;
/** A unique schema name; the rig drops it after the test, whether or not the test created it. */
function freshSchema(prefix: string): string {
  return uniqueName(prefix);
}

async function tablesIn(schema: string): Promise<string[]> {
  const { rows } = await admin.query<{ table_name: string }>(
    `SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name`,
    [schema],
  );
  return rows.map((row) => row.table_name);
}

/** Columns, types, nullability and defaults, plus index and constraint definitions, with the schema name taken out. */
async function shapeOf(schema: string): Promise<{ columns: string[]; indexes: string[]; constraints: string[] }> {
  const columns = await admin.query<{ c: string }>(
    `SELECT table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '') AS c
       FROM information_schema.columns WHERE table_schema = $1 ORDER BY 1`,
    [schema],
  );
  const indexes = await admin.query<{ c: string }>(
    `SELECT indexname || ' ' || indexdef AS c FROM pg_indexes WHERE schemaname = $1 ORDER BY 1`,
    [schema],
  );
  const constraints = await admin.query<{ c: string }>(
    `SELECT con.conname || ' ' || pg_get_constraintdef(con.oid) AS c
       FROM pg_constraint con JOIN pg_namespace ns ON ns.oid = con.connamespace
      WHERE ns.nspname = $1 ORDER BY 1`,
    [schema],
  );
  const strip = (text: string) => text.split(schema).join('<schema>');
  return {
    columns: columns.rows.map((row) => strip(row.c)),
    indexes: indexes.rows.map((row) => strip(row.c)),
    constraints: constraints.rows.map((row) => strip(row.c)),
  };
}

/** Runs migrate() in a separate Node process, so the race includes real processes and migrate's own pool. */
function migrateInChildProcess(schema: string): Promise<MigrateResult> {
  const script = `
    const { migrate } = await import(${JSON.stringify(MIGRATE_MODULE)});
    const result = await migrate(process.env.DATABASE_URL, { schema: process.env.CONVERGE_SCHEMA });
    process.stdout.write(JSON.stringify(result));
  `;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: REPO_ROOT,
      env: { ...process.env, DATABASE_URL, CONVERGE_SCHEMA: schema },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) reject(new Error(`child migrate exited with ${code}: ${stderr}`));
      else resolve(JSON.parse(stdout) as MigrateResult);
    });
  });
}

before(async () => {
  admin = await connectPostgres(3);
});

after(async () => {
  await admin.end();
});

describe('migrate', () => {
  it('lets concurrent migrators from many connections and processes race on a fresh schema; exactly one applies', async () => {
    const schema = freshSchema('cvt_mig_race');
    const pools = await Promise.all(Array.from({ length: 10 }, () => connectPostgres(1)));
    // Holding migrate's advisory lock first makes every migrator queue behind it, so they
    // are provably all in flight together when it is released rather than racing by luck.
    const gate = await admin.connect();
    try {
      await gate.query('BEGIN');
      await gate.query(`SELECT pg_advisory_xact_lock(hashtext('converge.migrate'), hashtext($1))`, [schema]);
      const { rows } = await gate.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      const gatePid = rows[0]!.pid;

      const runs = [
        ...pools.map((pool) => migrate(pool, { schema })),
        ...Array.from({ length: 3 }, () => migrateInChildProcess(schema)),
      ];
      const settled = Promise.allSettled(runs);
      await waitFor(
        async () => {
          const waiting = await admin.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))`,
            [gatePid],
          );
          return waiting.rows[0]!.n === runs.length;
        },
        `${runs.length} migrators waiting on the migration lock`,
        60_000,
      );
      assert.deepEqual(await tablesIn(schema), [], 'nothing is created while the lock is held');
      await gate.query('COMMIT');

      const outcomes = await settled;
      const failures = outcomes.filter((outcome) => outcome.status === 'rejected');
      assert.deepEqual(failures, [], 'every migrator succeeds');
      const results = outcomes.map((outcome) => (outcome as PromiseFulfilledResult<MigrateResult>).value);
      const appliers = results.filter((result) => result.applied.length > 0);
      assert.equal(appliers.length, 1, 'exactly one migrator applies the migrations');
      assert.deepEqual(
        appliers[0]!.applied,
        migrations.map((m) => m.version),
      );
      for (const result of results) {
        assert.equal(result.schema, schema);
        assert.equal(result.version, LATEST_MIGRATION);
      }
    } finally {
      await gate.query('ROLLBACK').catch(() => undefined);
      gate.release();
      await Promise.all(pools.map((pool) => pool.end()));
    }

    const { rows } = await admin.query<{ version: number; name: string; n: number }>(
      `SELECT version, name, count(*) OVER (PARTITION BY version)::int AS n FROM "${schema}".migrations ORDER BY version`,
    );
    assert.deepEqual(
      rows.map((row) => [row.version, row.name, row.n]),
      migrations.map((m) => [m.version, m.name, 1]),
    );
    assert.deepEqual(await tablesIn(schema), CONVERGE_TABLES);
  });

  it('is a no-op the second time', async () => {
    const schema = freshSchema('cvt_mig_again');
    const first = await migrate(admin, { schema });
    assert.deepEqual(
      first.applied,
      migrations.map((m) => m.version),
    );
    const before = await shapeOf(schema);
    const second = await migrate(admin, { schema });
    assert.deepEqual(second, { schema, applied: [], version: LATEST_MIGRATION });
    assert.deepEqual(await shapeOf(schema), before);
    const { rows } = await admin.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${schema}".migrations`);
    assert.equal(rows[0]!.n, migrations.length);
  });

  it('sets the storage options that keep relay and version updates HOT and statistics fresh', async () => {
    const schema = freshSchema('cvt_mig_storage');
    await migrate(admin, { schema });
    const { rows } = await admin.query<{ relname: string; reloptions: string[] | null }>(
      `SELECT c.relname, c.reloptions FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname IN ('outbox', 'projection_state')`,
      [schema],
    );
    const options = new Map(rows.map((row) => [row.relname, row.reloptions ?? []]));
    const fillfactors = (table: string) => options.get(table)?.filter((option) => option.startsWith('fillfactor='));
    // Migration 20: room for each row's claim version while a transaction holds the xmin horizon.
    assert.deepEqual(fillfactors('outbox'), ['fillfactor=45']);
    assert.ok(options.get('outbox')?.includes('autovacuum_analyze_scale_factor=0.01'));
    // Migration 19: room for version updates while a transaction holds the xmin horizon.
    assert.deepEqual(fillfactors('projection_state'), ['fillfactor=30']);
  });

  it('gives a partitioned outbox its fillfactor through every partition and the layout new partitions copy', async () => {
    const schema = freshSchema('cvt_mig_part_storage');
    await migrate(admin, { schema, partitioned: { intervalMs: 3_600_000, ahead: 2 } });
    const outboxStorage = async () => {
      const partitions = await admin.query<{ name: string; reloptions: string[] | null }>(
        `SELECT c.oid::regclass::text AS name, c.reloptions FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
          WHERE i.inhparent = $1::regclass`,
        [`"${schema}".outbox`],
      );
      const layout = await admin.query<{ storage: string[] }>(
        `SELECT storage FROM "${schema}".partition_layout WHERE table_name = 'outbox'`,
      );
      const fillfactorOf = (options: string[] | null) => (options ?? []).filter((o) => o.startsWith('fillfactor='));
      return {
        names: partitions.rows.map((row) => row.name),
        partitions: partitions.rows.map((row) => fillfactorOf(row.reloptions)),
        layout: fillfactorOf(layout.rows[0]!.storage),
      };
    };
    const converted = await outboxStorage();
    assert.ok(converted.partitions.length >= 3, `partitions: ${converted.partitions.length}`);
    // Schemas partitioned before migration 20 have 80 everywhere: the migration's own statement changes them.
    await admin.query(
      `UPDATE "${schema}".partition_layout SET storage = array_replace(storage, 'fillfactor=45', 'fillfactor=80')`,
    );
    for (const name of converted.names) await admin.query(`ALTER TABLE ${name} SET (fillfactor = 80)`);
    assert.deepEqual((await outboxStorage()).layout, ['fillfactor=80']);
    for (const statement of migrations.find((m) => m.version === 20)!.statements(schemaRef(schema)))
      await admin.query(statement);
    const after20 = await outboxStorage();
    assert.deepEqual(after20.layout, ['fillfactor=45']);
    assert.deepEqual(
      after20.partitions,
      converted.partitions.map(() => ['fillfactor=45']),
    );
  });

  it('opens and closes its own connection when given only a connection string', async () => {
    const schema = freshSchema('cvt_mig_url');
    const result = await migrate(DATABASE_URL, { schema });
    assert.deepEqual(
      result.applied,
      migrations.map((m) => m.version),
    );
    assert.deepEqual(await tablesIn(schema), CONVERGE_TABLES);
  });

  it('rejects an invalid schema name before touching the database', async () => {
    let connects = 0;
    const spy = {
      connect() {
        connects++;
        throw new Error('must not connect');
      },
      query() {
        connects++;
        throw new Error('must not query');
      },
    } as unknown as pg.Pool;
    for (const schema of ['Converge', 'x"; DROP SCHEMA public; --', '', 'a-b', 'x'.repeat(64)]) {
      await assert.rejects(migrate(spy, { schema }), InvalidIdentifierError, JSON.stringify(schema));
      assert.throws(() => migrationSql(schema), InvalidIdentifierError);
    }
    assert.equal(connects, 0);
  });

  it('refuses a database that has migrations newer than it knows, and changes nothing', async () => {
    const schema = freshSchema('cvt_mig_new');
    await migrate(admin, { schema });
    const newer = LATEST_MIGRATION + 1;
    await admin.query(`INSERT INTO "${schema}".migrations (version, name) VALUES ($1, 'from a newer converge')`, [
      newer,
    ]);
    await admin.query(`DROP TABLE "${schema}".quarantine`);

    await assert.rejects(migrate(admin, { schema }), (err: unknown) => {
      assert.ok(err instanceof SchemaTooNewError);
      assert.equal(err.code, 'CONVERGE_SCHEMA_TOO_NEW');
      assert.equal(err.databaseVersion, newer);
      assert.equal(err.knownVersion, LATEST_MIGRATION);
      return true;
    });
    // An older converge must not "repair" a schema a newer one owns.
    assert.ok(!(await tablesIn(schema)).includes('quarantine'));
    const { rows } = await admin.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${schema}".migrations`);
    assert.equal(rows[0]!.n, migrations.length + 1);
  });

  it('applies all of a migration or none of it', async () => {
    const schema = freshSchema('cvt_mig_atomic');
    // A pre-existing, incompatible outbox makes a later statement of migration 1 fail.
    await admin.query(`CREATE SCHEMA "${schema}"`);
    await admin.query(`CREATE TABLE "${schema}".outbox (id int)`);
    await assert.rejects(migrate(admin, { schema }), (err: unknown) => (err as { code?: string }).code === '42703');
    assert.deepEqual(await tablesIn(schema), ['outbox']);
  });

  it('releases its connection after a failure, so the pool stays usable', async () => {
    const schema = freshSchema('cvt_mig_fail');
    const pool = await connectPostgres(1);
    try {
      await migrate(pool, { schema });
      await pool.query(`INSERT INTO "${schema}".migrations (version, name) VALUES ($1, 'future')`, [
        LATEST_MIGRATION + 5,
      ]);
      await assert.rejects(migrate(pool, { schema }), SchemaTooNewError);
      const { rows } = await pool.query<{ ok: number }>('SELECT 1 AS ok');
      assert.equal(rows[0]!.ok, 1);
      assert.equal(pool.idleCount, 1);
    } finally {
      await pool.end();
    }
  });
});

describe('migrationSql', () => {
  it('produces, as one plain script, the same schema migrate() builds', async () => {
    const viaMigrate = freshSchema('cvt_mig_api');
    const viaScript = freshSchema('cvt_mig_sql');
    await migrate(admin, { schema: viaMigrate });

    const script = migrationSql(viaScript);
    await admin.query(script);

    assert.deepEqual(await tablesIn(viaScript), CONVERGE_TABLES);
    assert.deepEqual(await shapeOf(viaScript), await shapeOf(viaMigrate));
    const { rows } = await admin.query<{ version: number; name: string }>(
      `SELECT version, name FROM "${viaScript}".migrations ORDER BY version`,
    );
    assert.deepEqual(
      rows,
      migrations.map((m) => ({ version: m.version, name: m.name })),
    );
  });

  it('can be run twice and leaves migrate() nothing to do', async () => {
    const schema = freshSchema('cvt_mig_sql2');
    await admin.query(migrationSql(schema));
    await admin.query(migrationSql(schema));
    const result = await migrate(admin, { schema });
    assert.deepEqual(result.applied, []);
    const { rows } = await admin.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${schema}".migrations`);
    assert.equal(rows[0]!.n, migrations.length);
  });

  it("defaults to the 'converge' schema and quotes it everywhere", () => {
    const script = migrationSql();
    assert.match(script, /^CREATE SCHEMA IF NOT EXISTS "converge";/);
    assert.doesNotMatch(
      script.replace(/"converge"\./g, ''),
      /\bconverge\.(outbox|inbox|quarantine|projection_state|migrations)\b/,
    );
  });
});
