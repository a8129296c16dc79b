/**
 * A converge schema as an older release left it: the migrations up to `version` applied, as
 * migrate() would have applied them then, so upgrade tests can write rows of every old shape
 * before running today's migrate().
 */
import type pg from 'pg';
import { schemaRef } from '../../src/runtime/identifier.js';
import { migrateSql } from '../../src/schema/sql.js';

export async function migrateTo(pool: pg.Pool, schema: string, version: number): Promise<void> {
  const sql = migrateSql(schemaRef(schema));
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query(sql.lock, [schema]);
    await client.query(sql.createSchema);
    await client.query(sql.createMigrationsTable);
    for (const step of sql.steps) {
      if (step.version > version) break;
      for (const statement of step.statements) await client.query(statement);
      await client.query(sql.recordMigration, [step.version, step.name]);
    }
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}
