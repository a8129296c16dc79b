import type { Executor } from '../db/executor.js';
import { runStatement } from '../db/statement.js';
import { readReplayOf } from './headers.js';
import type { RawDelivery, Settlement } from './types.js';
import type { SchemaRef } from '../runtime/identifier.js';
import { inboxSql } from './sql.js';

/** What the consumer did with a replayed message, recorded on the quarantine row it came from. */
export type ReplayOutcome = 'applied' | 'duplicate' | 'ignored' | 'parked' | 'quarantined' | 'conflict';

export interface ReplayRecord {
  delivery: RawDelivery;
  outcome: ReplayOutcome;
  /** The quarantine row a failed replay landed in. */
  quarantineId?: string;
}

/**
 * Two statements for the replayed deliveries among `records` (wait for their replays to commit,
 * then record), none when there are none: normal deliveries cost a header lookup and nothing more.
 */
export async function recordReplayOutcomes(
  executor: Executor,
  schema: SchemaRef,
  records: readonly ReplayRecord[],
): Promise<void> {
  const replays = records.flatMap((record) => {
    const replayOf = readReplayOf(record.delivery);
    return replayOf === null ? [] : [{ replayOf, ...record }];
  });
  if (replays.length === 0) return;
  await runStatement(executor, inboxSql(schema).awaitReplays, [replays.map((r) => r.replayOf.id)]);
  await runStatement(executor, inboxSql(schema).replayOutcome, [
    replays.map((r) => r.replayOf.id),
    replays.map((r) => r.outcome),
    replays.map((r) => r.quarantineId ?? null),
    replays.map((r) => r.replayOf.token),
  ]);
}

/** The outcome to record for a settled replay; retries are still in flight and record nothing. */
export function replayRecord(delivery: RawDelivery, settlement: Settlement): ReplayRecord | null {
  if (settlement.action === 'retry') return null;
  if (settlement.outcome !== 'quarantined') return { delivery, outcome: settlement.outcome };
  return {
    delivery,
    outcome: settlement.reason === 'content-conflict' ? 'conflict' : 'quarantined',
    quarantineId: settlement.quarantineId,
  };
}
