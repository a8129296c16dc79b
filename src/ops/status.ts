import type { Executor } from '../db/executor.js';
import { schemaRef } from '../runtime/identifier.js';

import { z } from 'zod';
import { defineOptions, schemaOption } from '../runtime/options.js';
import { readFailedReasons, readOutboxByStatus } from './gauges.js';
import { opsSql } from './sql.js';

export const statusOptions = defineOptions('readStatus', z.strictObject({ schema: schemaOption }));
export const listOutboxOptions = defineOptions(
  'listOutbox',
  z.strictObject({
    schema: schemaOption,
    status: z.enum(['pending', 'published', 'failed']).default('failed').describe('Rows of this status.'),
    limit: z.number().int().min(1).max(100_000).default(100).describe('Most rows, oldest first.'),
  }),
);

export interface ConvergeStatus {
  outbox: {
    pending: number;
    published: number;
    failed: number;
    oldestPendingAgeSeconds: number | null;
    /** Failed rows per reason (last_error), the 20 most common. */
    failedReasons: Record<string, number>;
  };
  quarantine: Record<string, number>;
}

/** Where work is stuck: unpublished and failed outbox rows, age of the oldest pending, open quarantine by reason. */
export async function readStatus(
  executor: Executor,
  options: z.input<typeof statusOptions.schema> = {},
): Promise<ConvergeStatus> {
  const { schema } = statusOptions.parse(options);
  const ref = schemaRef(schema);
  const status: ConvergeStatus = {
    outbox: { pending: 0, published: 0, failed: 0, oldestPendingAgeSeconds: null, failedReasons: {} },
    quarantine: {},
  };
  for (const row of await readOutboxByStatus(executor, ref)) {
    status.outbox[row.status] = row.rows;
    if (row.status === 'pending' && row.oldestAgeSeconds !== null)
      status.outbox.oldestPendingAgeSeconds = row.oldestAgeSeconds;
  }
  if (status.outbox.failed > 0) status.outbox.failedReasons = await readFailedReasons(executor, ref);
  const sql = opsSql(ref);
  const quarantine = await executor.query<{ reason: string; n: string }>(sql.openQuarantine);
  for (const row of quarantine.rows) status.quarantine[row.reason] = Number(row.n);
  return status;
}

export interface OutboxRow {
  eventId: string;
  aggregateType: string;
  aggregateId: string;
  aggregateVersion: number;
  eventType: string;
  status: 'pending' | 'published' | 'failed';
  /** Failed publishes charged to the event (returns): maxAttempts of them mark it failed. */
  attempts: number;
  /** Publishes the broker refused or did not confirm (nacks, lost confirms): retried without limit. */
  brokerRetries: number;
  /** The relay's last failure code (e.g. CONVERGE_PUBLISH_RETURNED); never a payload. */
  lastError: string | null;
  occurredAt: Date;
  ageSeconds: number;
}

/** Lists outbox rows of one status (default `failed`), oldest first, without payloads. */
export async function listOutbox(
  executor: Executor,
  input: z.input<typeof listOutboxOptions.schema> = {},
): Promise<OutboxRow[]> {
  const options = listOutboxOptions.parse(input);
  const sql = opsSql(schemaRef(options.schema));
  const { rows } = await executor.query<{
    event_id: string;
    aggregate_type: string;
    aggregate_id: string;
    aggregate_version: string;
    event_type: string;
    status: OutboxRow['status'];
    attempts: number;
    broker_retries: number;
    last_error: string | null;
    occurred_at: Date;
    age_seconds: string;
  }>(sql.listOutbox, [options.status, options.limit]);
  return rows.map((row) => ({
    eventId: row.event_id,
    aggregateType: row.aggregate_type,
    aggregateId: row.aggregate_id,
    aggregateVersion: Number(row.aggregate_version),
    eventType: row.event_type,
    status: row.status,
    attempts: row.attempts,
    brokerRetries: row.broker_retries,
    lastError: row.last_error,
    occurredAt: row.occurred_at,
    ageSeconds: Number(row.age_seconds),
  }));
}
