import { perSchema, type SchemaRef } from '../runtime/identifier.js';
import { migrations } from './migrations.js';

/** What migrate() runs on one schema, and the script migrationSql() prints for it, built once per schema. */
export const migrateSql = perSchema((schema: SchemaRef) => {
  const createSchema = `CREATE SCHEMA IF NOT EXISTS ${schema.quoted}`;
  const createMigrationsTable = `CREATE TABLE IF NOT EXISTS ${schema.quoted}.migrations (
      version    integer PRIMARY KEY,
      name       text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now()
    )`;
  const steps = migrations.map((migration) => ({ ...migration, statements: migration.statements(schema) }));
  const script = [
    `${createSchema};`,
    `CREATE TABLE IF NOT EXISTS ${schema.quoted}.migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now());`,
    ...steps.flatMap((step) => [
      `-- migration ${step.version}: ${step.name}`,
      ...step.statements.map((statement) => `${statement};`),
      `INSERT INTO ${schema.quoted}.migrations (version, name) VALUES (${step.version}, '${step.name.replace(/'/g, "''")}') ON CONFLICT DO NOTHING;`,
    ]),
  ].join('\n');
  return {
    /** $1 the schema name: concurrent migrators of one schema queue up on it. */
    lock: `SELECT pg_advisory_xact_lock(hashtext('converge.migrate'), hashtext($1))`,
    /** $1 the schema name. */
    schemaExists: `SELECT 1 FROM pg_namespace WHERE nspname = $1`,
    createSchema,
    createMigrationsTable,
    appliedVersions: `SELECT version FROM ${schema.quoted}.migrations`,
    /** $1 the quoted `schema.migrations`: is it there, and may this role read it (runtime roles get no grant on it). */
    probeMigrations: `SELECT to_regclass($1) IS NOT NULL AS present,
      coalesce(has_table_privilege(to_regclass($1), 'SELECT'), false) AS readable`,
    currentVersion: `SELECT coalesce(max(version), 0) AS version FROM ${schema.quoted}.migrations`,
    /** $1 quoted `schema.table` names: those that do not exist. */
    missingTables: `SELECT t AS name FROM unnest($1::text[]) AS t WHERE to_regclass(t) IS NULL`,
    /** $1 version, $2 name. */
    recordMigration: `INSERT INTO ${schema.quoted}.migrations (version, name) VALUES ($1, $2)`,
    /** Every migration with its statements for this schema, in order. */
    steps,
    /** The whole upgrade from an empty database as one script, for DBAs who apply schema changes themselves. */
    script,
  };
});
