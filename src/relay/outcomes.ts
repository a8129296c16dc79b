import type { EventEmitter } from 'node:events';
import type pg from 'pg';
import { backoffDelay } from '../runtime/backoff.js';
import { PublishError } from '../runtime/errors.js';
import { runStatement } from '../db/statement.js';
import type { ResolvedRelayOptions } from './options.js';
import type { TransportPublisher } from '../transport/transport.js';
import type { BrokerLink } from './broker-link.js';
import { chargedToEvent, lostWithConnection, onlyNacked, retryNumber } from './failures.js';
import type { ClaimedRow, relaySql } from './sql.js';
import { eachUnlessRefused, type SetAsideContext } from './set-aside.js';
import type { RelayCycleResult, RelayEvents } from './types.js';

export interface RejectedRow {
  row: ClaimedRow;
  error: PublishError;
}

/** What settling a batch's outcomes needs of its relay. */
export interface OutcomeContext {
  pool: pg.Pool;
  sql: ReturnType<typeof relaySql>;
  options: ResolvedRelayOptions;
  events: EventEmitter<RelayEvents>;
  /** What fences its writes: the relayId written into claimed_by, or null for an exclusive relay (claim.ts). */
  owner: string | null;
  /** Where a row goes that the table refuses to mark (set-aside.ts): the other rows are still marked. */
  setAside: SetAsideContext;
}

/**
 * Marks what the broker confirmed (and did not return), fenced by the claim: a row another relay
 * re-claimed after this one's lease ran out is left to it (a duplicate, never a loss).
 */
export async function markConfirmed(
  ctx: OutcomeContext,
  confirmed: ClaimedRow[],
  latenciesMs: number[],
  result: RelayCycleResult,
): Promise<void> {
  const { options, events } = ctx;
  if (events.listenerCount('confirmed') > 0) events.emit('confirmed', latenciesMs);
  await options.hooks.afterConfirm?.(confirmed.map((row) => row.event_id));
  const marked = await eachUnlessRefused(
    ctx.setAside,
    confirmed.map((row) => row.position),
    async (positions) =>
      (
        await runStatement<{ event_id: string; unblocks: boolean }>(ctx.pool, ctx.sql.markPublished, [
          ctx.owner,
          positions,
        ])
      ).rows,
  );
  // A row set aside as failed unblocks nothing (it holds back its own aggregate), but frees its batch.
  result.unblocked = marked.rows.some((row) => row.unblocks) || marked.failed > 0;
  result.published = marked.rows.length;
  result.failed += marked.failed;
  result.fenced = confirmed.length - result.published - marked.refused;
  if (result.fenced > 0)
    options.logger.warn(
      { relayId: options.relayId, fenced: result.fenced },
      'claim lost before marking; another relay re-publishes these events',
    );
  if (marked.rows.length > 0)
    events.emit(
      'published',
      marked.rows.map((row) => row.event_id),
    );
}

/**
 * Rows the broker did not take get a backoff and the error code. A return counts as an attempt
 * and fails the row after maxAttempts; an unencodable row fails at once, with the field and rule;
 * a broker refusal counts as a broker retry, which never fails the row (failures.ts).
 */
export async function reschedule(
  ctx: OutcomeContext,
  rejected: RejectedRow[],
  result: RelayCycleResult,
): Promise<void> {
  const { options } = ctx;
  const delays = new Map(rejected.map(({ row }) => [row.position, backoffDelay(retryNumber(row), options.backoff)]));
  const { rows, failed } = await eachUnlessRefused(
    ctx.setAside,
    rejected.map(({ row }) => row.position),
    async (positions) => {
      const these = rejected.filter(({ row }) => positions.includes(row.position));
      const written = await runStatement<{
        event_id: string;
        status: string;
        attempts: number;
        broker_retries: number;
      }>(ctx.pool, ctx.sql.reschedule, [
        ctx.owner,
        these.map(({ row }) => row.position),
        // An unencodable row fails for good: keep why (the field and rule, never a value) next to it.
        these.map(({ error }) => (error.reason === 'unencodable' ? `${error.code}: ${error.message}` : error.code)),
        these.map(({ row }) => delays.get(row.position)!),
        options.maxAttempts,
        these.map(({ error }) => error.reason === 'unencodable'),
        these.map(({ error }) => chargedToEvent(error.reason)),
      ]);
      return written.rows;
    },
  );
  result.failed += failed;
  const reasons = new Map(rejected.map(({ row, error }) => [row.event_id, error.reason]));
  for (const row of rows) {
    const info = {
      eventId: row.event_id,
      attempts: row.attempts,
      brokerRetries: row.broker_retries,
      reason: reasons.get(row.event_id) ?? 'unknown',
    };
    if (row.status === 'failed') {
      result.failed++;
      options.logger.error(info, 'event failed permanently; it stays in the outbox as failed');
      ctx.events.emit('failed', info);
    } else {
      result.retried++;
      options.logger.warn(info, 'publish not confirmed; retry scheduled');
      ctx.events.emit('retry', info);
    }
  }
}

/**
 * Rows whose publish waited on a blocked connection and was then given up (the relay stopped,
 * the connection went away): the broker judged nothing about them, so they are released for the
 * next claim as they were, without an attempt, a backoff or an error.
 */
export async function release(ctx: OutcomeContext, rejected: RejectedRow[]): Promise<void> {
  const { rows } = await runStatement<{ event_id: string }>(ctx.pool, ctx.sql.release, [
    ctx.owner,
    rejected.map(({ row }) => row.position),
  ]);
  if (rows.length > 0)
    ctx.options.logger.info(
      { relayId: ctx.options.relayId, released: rows.length },
      'publishes held up by a blocked broker connection released without counting an attempt',
    );
}

/** A batch's rejections, with what settling them needs to know about the batch. */
export interface RejectedBatch {
  rejected: RejectedRow[];
  /** How many rows of the same batch the broker confirmed. */
  confirmed: number;
  result: RelayCycleResult;
  publisher: TransportPublisher;
  /** When the batch was written (performance.now()). */
  sentAt: number;
}

/**
 * A publish lost with its connection or channel while the broker blocked it is released as it
 * was (the broker judged nothing); every other rejection is rescheduled with backoff. A lost
 * confirm or channel drops the channel and its connection (only if still the current one: a
 * newer channel other batches use stays), so no late confirm of a given-up publish is waited on.
 * A batch the broker only nacked costs its channel (failures.ts).
 */
export async function settleRejected(ctx: OutcomeContext, broker: BrokerLink, batch: RejectedBatch): Promise<void> {
  const { rejected, publisher } = batch;
  const waited = broker.blockedSince(batch.sentAt);
  const released = rejected.filter(({ error }) => waited && lostWithConnection(error));
  const attempted = rejected.filter((rejection) => !released.includes(rejection));
  if (released.length > 0) await release(ctx, released);
  if (attempted.length > 0) await reschedule(ctx, attempted, batch.result);
  if (rejected.some(({ error }) => lostWithConnection(error))) await broker.discard(publisher);
  else if (
    onlyNacked(
      batch.confirmed,
      rejected.map(({ error }) => error),
    )
  )
    broker.renewChannel(publisher);
}

/** A cycle's result before anything is settled. */
export function cycleResult(claimed: number): RelayCycleResult {
  return { claimed, published: 0, retried: 0, failed: 0, fenced: 0, unblocked: false };
}

/** A sent batch: each row's outcome (confirm latency in ms, or why the broker did not take it). */
export interface SentBatch {
  rows: ClaimedRow[];
  outcomes: (PublishError | number)[];
  result: RelayCycleResult;
  publisher: TransportPublisher;
  sentAt: number;
}

/** Marks what the broker confirmed, then settles what it did not take. */
export async function settleBatch(
  ctx: OutcomeContext,
  broker: BrokerLink,
  batch: SentBatch,
): Promise<RelayCycleResult> {
  const { rows, outcomes, result } = batch;
  const confirmed = rows.filter((_, i) => typeof outcomes[i] === 'number');
  const rejected = rows.flatMap((row, i) => {
    const outcome = outcomes[i];
    return outcome instanceof PublishError ? [{ row, error: outcome }] : [];
  });
  const latencies = outcomes.filter((o): o is number => typeof o === 'number');
  if (confirmed.length > 0) await markConfirmed(ctx, confirmed, latencies, result);
  if (rejected.length > 0)
    await settleRejected(ctx, broker, {
      rejected,
      confirmed: confirmed.length,
      result,
      publisher: batch.publisher,
      sentAt: batch.sentAt,
    });
  return result;
}
