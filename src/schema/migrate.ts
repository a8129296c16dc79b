import pg from 'pg';
import { quoteIdentifier } from '../runtime/identifier.js';
import { SchemaTooNewError } from '../runtime/errors.js';
import { DEFAULT_SCHEMA } from '../runtime/defaults.js';
import { LATEST_MIGRATION, migrations } from './migrations.js';


export interface MigrateOptions {
  /** A pool or client to use; otherwise one connection is opened from `connectionString`. */
  pool?: pg.Pool;
  connectionString?: string;
  /** Defaults to `converge`. */
  schema?: string;
}

export interface MigrateResult {
  schema: string;
  applied: number[];
  version: number;
}

/**
 * Brings the schema to the latest migration. All of it runs in one transaction that first
 * takes a transaction-scoped advisory lock keyed on the schema name, so concurrent
 * migrators queue up and each later one finds nothing left to do.
 */
export async function migrate(options: MigrateOptions = {}): Promise<MigrateResult> {
  const schemaName = options.schema ?? DEFAULT_SCHEMA;
  // Checked before a pool exists, so a bad name never reaches a connection.
  const schema = quoteIdentifier(schemaName, 'schema');
  const ownPool = options.pool ? undefined : new pg.Pool({ connectionString: options.connectionString, max: 1 });
  const pool = options.pool ?? ownPool!;
  let client: pg.PoolClient | undefined;
  try {
    client = await pool.connect();
    await client.query('BEGIN');
    await client.query(`SELECT pg_advisory_xact_lock(hashtext('converge.migrate'), hashtext($1))`, [schemaName]);
    // CREATE SCHEMA IF NOT EXISTS checks CREATE on the database even when the schema exists; skipping
    // it lets a migration role that owns a schema a DBA created run without that database privilege.
    const existing = await client.query(`SELECT 1 FROM pg_namespace WHERE nspname = $1`, [schemaName]);
    if (existing.rowCount === 0) await client.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
    await client.query(`CREATE TABLE IF NOT EXISTS ${schema}.migrations (
      version    integer PRIMARY KEY,
      name       text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now()
    )`);
    const { rows } = await client.query<{ version: number }>(`SELECT version FROM ${schema}.migrations`);
    const done = new Set(rows.map((row) => row.version));
    const newest = Math.max(0, ...done);
    if (newest > LATEST_MIGRATION) throw new SchemaTooNewError(newest, LATEST_MIGRATION);
    const applied: number[] = [];
    for (const migration of migrations) {
      if (done.has(migration.version)) continue;
      for (const statement of migration.statements(schema)) await client.query(statement);
      await client.query(`INSERT INTO ${schema}.migrations (version, name) VALUES ($1, $2)`, [migration.version, migration.name]);
      applied.push(migration.version);
    }
    await client.query('COMMIT');
    return { schema: schemaName, applied, version: LATEST_MIGRATION };
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
  const schema = quoteIdentifier(schemaName, 'schema');
  const parts = [`CREATE SCHEMA IF NOT EXISTS ${schema};`];
  parts.push(`CREATE TABLE IF NOT EXISTS ${schema}.migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now());`);
  for (const migration of migrations) {
    parts.push(`-- migration ${migration.version}: ${migration.name}`);
    for (const statement of migration.statements(schema)) parts.push(`${statement};`);
    parts.push(`INSERT INTO ${schema}.migrations (version, name) VALUES (${migration.version}, '${migration.name.replace(/'/g, "''")}') ON CONFLICT DO NOTHING;`);
  }
  return parts.join('\n');
}
