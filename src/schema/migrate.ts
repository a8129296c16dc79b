import pg from 'pg';
import { schemaRef } from '../runtime/identifier.js';
import { SchemaNotMigratedError, SchemaTooNewError } from '../runtime/errors.js';
import { assertDatabaseUrl, databaseFailure, newPool, poolTarget, schemaReadFailure } from '../db/pool.js';
import { commit } from '../db/transaction.js';
import { DEFAULT_SCHEMA } from '../runtime/defaults.js';
import { LATEST_MIGRATION } from './migrations.js';
import { migrateSql } from './sql.js';
import { convertToPartitions, databaseNow } from './partitioning.js';
import { partitionedOption } from './partition-options.js';
import { z } from 'zod';
import { schemaNameOption } from '../runtime/option-fields.js';
import { defineOptions, parseOptions, poolOption } from '../runtime/options.js';

const migrateTarget = z.union([poolOption, z.string().min(1)], {
  error: 'a pg.Pool or a connection string is required (the library reads no environment)',
});

export const migrateOptions = defineOptions(
  'migrate',
  z.strictObject({
    // Checked by schemaRef() below, which names the option in an InvalidIdentifierError.
    schema: schemaNameOption.describe("Schema to create or upgrade converge's tables in."),
    partitioned: partitionedOption,
  }),
);

export type MigrateOptions = z.input<typeof migrateOptions.schema>;

/** Where to migrate: a pool (the caller keeps it) or a connection string (a one-connection pool is opened and closed). */
export type MigrateTarget = pg.Pool | string;

export interface MigrateResult {
  schema: string;
  applied: number[];
  version: number;
  /** With `partitioned`: the tables this run turned into partitions (none when they already were). */
  partitioned?: string[];
}

/**
 * Brings the schema to the latest migration. All of it runs in one transaction that first
 * takes a transaction-scoped advisory lock keyed on the schema name, so concurrent
 * migrators queue up and each later one finds nothing left to do.
 */
export async function migrate(target: MigrateTarget, input: MigrateOptions = {}): Promise<MigrateResult> {
  const connection = parseOptions(migrateTarget, target, 'target');
  const options = migrateOptions.parse(input);
  // Checked before a pool exists, so a bad name never reaches a connection.
  const schema = schemaRef(options.schema);
  const sql = migrateSql(schema);
  if (typeof connection === 'string') assertDatabaseUrl(connection);
  const ownPool = typeof connection === 'string' ? newPool({ connectionString: connection, max: 1 }) : undefined;
  const pool = ownPool ?? (connection as pg.Pool);
  let client: pg.PoolClient | undefined;
  try {
    client = await pool.connect().catch((err: unknown) => {
      throw databaseFailure(err, poolTarget(pool));
    });
    await client.query('BEGIN');
    await client.query(sql.lock, [schema.name]);
    // CREATE SCHEMA IF NOT EXISTS checks CREATE on the database even when the schema exists; skipping
    // it lets a migration role that owns a schema a DBA created run without that database privilege.
    const existing = await client.query(sql.schemaExists, [schema.name]);
    if (existing.rowCount === 0) await client.query(sql.createSchema);
    await client.query(sql.createMigrationsTable);
    const { rows } = await client.query<{ version: number }>(sql.appliedVersions);
    const done = new Set(rows.map((row) => row.version));
    const newest = Math.max(0, ...done);
    if (newest > LATEST_MIGRATION) throw new SchemaTooNewError(newest, LATEST_MIGRATION);
    const applied: number[] = [];
    for (const step of sql.steps) {
      if (done.has(step.version)) continue;
      for (const statement of step.statements) await client.query(statement);
      await client.query(sql.recordMigration, [step.version, step.name]);
      applied.push(step.version);
    }
    const partitioned = options.partitioned
      ? await convertToPartitions(client, schema, options.partitioned, await databaseNow(client))
      : undefined;
    await commit(client);
    return { schema: schema.name, applied, version: LATEST_MIGRATION, ...(partitioned ? { partitioned } : {}) };
  } catch (err) {
    await client?.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client?.release();
    await ownPool?.end();
  }
}

/** The SQL `migrate()` would run on an empty database, for DBAs who apply schema changes themselves. */
export function migrationSql(schemaName = DEFAULT_SCHEMA): string {
  return migrateSql(schemaRef(schemaName)).script;
}

/** The tables of the latest migration, checked one by one when the role may not read `migrations`. */
const LATEST_TABLES = ['outbox', 'inbox', 'inbox_watermark', 'parked', 'quarantine', 'projection_state', 'header_key'];

/**
 * Checks, before a relay, consumer or operator tool starts work, that the schema holds
 * converge's tables at the migration this converge needs, so a missing `converge migrate`
 * fails at once with that hint instead of as a raw `42P01` on the first statement. A newer
 * schema passes (a newer converge migrated it during a rolling upgrade). Least-privilege
 * roles get no grant on `migrations`; for them the tables of the latest migration must exist.
 * Connection failures are thrown typed (ConnectionConfigError / ServiceUnavailableError).
 * Returns the version found, or null when the role may not read it.
 */
export async function checkSchema(pool: pg.Pool, schemaName: string): Promise<number | null> {
  const schema = schemaRef(schemaName);
  const sql = migrateSql(schema);
  const target = poolTarget(pool);
  try {
    const probe = await pool.query<{ present: boolean; readable: boolean }>(sql.probeMigrations, [
      `${schema.quoted}.migrations`,
    ]);
    const { present, readable } = probe.rows[0]!;
    if (!present) throw new SchemaNotMigratedError(schema.name, target.endpoint, 0, LATEST_MIGRATION);
    if (readable) {
      const { rows } = await pool.query<{ version: number }>(sql.currentVersion);
      const version = rows[0]!.version;
      if (version < LATEST_MIGRATION)
        throw new SchemaNotMigratedError(schema.name, target.endpoint, version, LATEST_MIGRATION);
      return version;
    }
    const missing = await pool.query(sql.missingTables, [LATEST_TABLES.map((t) => `${schema.quoted}.${t}`)]);
    if ((missing.rowCount ?? 0) > 0)
      throw new SchemaNotMigratedError(schema.name, target.endpoint, null, LATEST_MIGRATION);
    return null;
  } catch (err) {
    throw schemaReadFailure(err, target, {
      reason: `the role has no privileges on schema "${schema.name}"`,
      hint: 'run the statements `converge grants` prints, as the schema owner',
    });
  }
}
