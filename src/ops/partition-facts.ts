import type { Executor } from '../db/executor.js';
import type { SchemaRef } from '../runtime/identifier.js';
import { coveredUntil } from '../schema/partition-plan.js';
import { databaseNow, listPartitions, readPartitionLayout } from '../schema/partitioning.js';
import { round, type Finding, type PartitionFacts } from './facts.js';

/** Each partitioned table of the schema with how far ahead its partitions reach; none for the plain layout. */
export async function partitionFacts(executor: Executor, schema: SchemaRef): Promise<PartitionFacts[]> {
  const layouts = await readPartitionLayout(executor, schema);
  if (layouts.length === 0) return [];
  const nowMs = await databaseNow(executor);
  const facts: PartitionFacts[] = [];
  for (const layout of layouts) {
    const ranges = await listPartitions(executor, schema, layout.table);
    facts.push({
      table: layout.table,
      intervalMs: layout.intervalMs,
      ahead: layout.ahead,
      partitions: ranges.length,
      coveredUntilMs: coveredUntil(ranges, nowMs),
      nowMs,
    });
  }
  return facts;
}

/**
 * Inserts fail with "no partition of relation found" once now passes the last partition, so a
 * table with less than one whole interval left is a warning (a relay creates them ahead, and
 * `converge maintain` does), and one with nothing for now is stalled.
 */
export function partitionFindings(facts: readonly PartitionFacts[]): Finding[] {
  return facts.flatMap((table): Finding[] => {
    const leftMs = table.coveredUntilMs === null ? null : table.coveredUntilMs - table.nowMs;
    if (leftMs !== null && leftMs >= table.intervalMs) return [];
    const base = {
      kind: 'partitions-not-ahead' as const,
      stage: 'database' as const,
      subject: table.table,
      lookAt:
        'a running relay creates partitions ahead (its log says why it could not: the role may lack CREATE on the schema); run `converge maintain` as the schema owner',
      recovered: `the ${table.table}'s partitions reach at least one interval (${round(table.intervalMs / 1000)} s) past now`,
    };
    if (leftMs === null)
      return [
        {
          ...base,
          severity: 'stalled',
          evidence: `no ${table.table} partition covers now: every insert into it fails`,
        },
      ];
    return [
      {
        ...base,
        severity: 'warning',
        evidence: `the ${table.table}'s partitions end in ${round(leftMs / 1000)} s, less than one interval: inserts fail after that`,
      },
    ];
  });
}
