import type { Executor } from '../db/executor.js';
import { runStatement } from '../db/statement.js';
import type { AggregateRef } from './types.js';
import type { SchemaRef } from '../runtime/identifier.js';
import { inboxSql } from './sql.js';

/**
 * The compaction watermark of one aggregate for `consumer`, or null
 * if none of its inbox rows was ever compacted. Read only when an event failed its version
 * check, never on the consumer's hot path.
 */
export async function readInboxWatermark(
  executor: Executor,
  schema: SchemaRef,
  consumer: string,
  aggregate: AggregateRef,
): Promise<number | null> {
  const { rows } = await runStatement<{ version: string }>(executor, inboxSql(schema).watermark, [
    consumer,
    aggregate.aggregateType,
    aggregate.aggregateId,
  ]);
  return rows[0] === undefined ? null : Number(rows[0].version);
}
