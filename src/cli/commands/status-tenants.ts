import type pg from 'pg';
import type { PipelineStatus } from '../../ops/index.js';
import { databaseFailure, poolTarget } from '../../db/pool.js';
import { checkSchema } from '../../schema/migrate.js';
import { openPool, type PoolMode } from '../context.js';

/** How status.ts reads and prints one schema (passed in: status.ts calls this module). */
export interface SchemaStatusReader {
  read(pool: pg.Pool, schema: string): Promise<PipelineStatus>;
  format(status: PipelineStatus): string;
  json: boolean;
}

/** Schemas read side by side at most: each holds a connection only while it reads. */
const AT_ONCE = 4;

/**
 * `status --schema a,b,c`: each tenant schema's pipeline, one section (or one JSON key) per
 * schema, on one small pool. True while any schema has a stalled stage (status exits 2 then).
 */
export async function tenantStatus(
  target: { databaseUrl: string; poolMode: PoolMode },
  schemas: string[],
  reader: SchemaStatusReader,
): Promise<boolean> {
  const pool = openPool(target.databaseUrl, AT_ONCE, 'converge-cli', target.poolMode);
  try {
    for (const schema of schemas) await checkSchema(pool, schema);
    const statuses: Record<string, PipelineStatus> = {};
    for (let i = 0; i < schemas.length; i += AT_ONCE) {
      const group = schemas.slice(i, i + AT_ONCE);
      const read = await Promise.all(group.map((schema) => reader.read(pool, schema)));
      group.forEach((schema, j) => (statuses[schema] = read[j]!));
    }
    if (reader.json) console.log(JSON.stringify({ schemas: statuses }, null, 2));
    else for (const schema of schemas) console.log(`schema ${schema}\n${reader.format(statuses[schema]!)}\n`);
    return Object.values(statuses).some((status) => status.stalled);
  } catch (err) {
    throw databaseFailure(err, poolTarget(pool));
  } finally {
    await pool.end();
  }
}
