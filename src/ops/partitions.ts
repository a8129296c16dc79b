import type pg from 'pg';
import { z } from 'zod';
import { schemaRef } from '../runtime/identifier.js';
import { defineOptions, parseOptions, poolOption, schemaOption } from '../runtime/options.js';
import { ensurePartitions } from '../schema/partitioning.js';

export const createPartitionsAheadOptions = defineOptions(
  'createPartitionsAhead',
  z.strictObject({ schema: schemaOption }),
);

/**
 * Creates the outbox and inbox partitions a partitioned schema needs for now and the intervals
 * ahead (a running relay does the same by itself); returns their names, none when all exist or
 * the schema is not partitioned. Needs the right to create tables in the schema.
 */
export async function createPartitionsAhead(
  pool: pg.Pool,
  input: z.input<typeof createPartitionsAheadOptions.schema> = {},
): Promise<string[]> {
  parseOptions(poolOption, pool, 'pool');
  const { schema } = createPartitionsAheadOptions.parse(input);
  return ensurePartitions(pool, schemaRef(schema));
}
