import type { EventEmitter } from 'node:events';
import type pg from 'pg';
import { backoffDelay } from '../../runtime/backoff.js';
import { PublishError } from '../../runtime/errors.js';
import { describeError } from '../../runtime/logger.js';
import { refusalReason } from '../../runtime/row-refused.js';
import { HeldMarks } from './held.js';
import { countRetry, markFailed, markPublished, retryInfo, type PendingFail, type PendingMark } from './marks.js';
import { tracePublish } from '../../telemetry/index.js';
import { encodeMessage, type EncodedMessage } from '../../transport/wire.js';
import { chargedToEvent } from '../failures.js';
import { publishableEnvelope } from '../row.js';
import type { BrokerSession, SessionLink } from '../broker-link.js';
import { formatLsn, parseLsn } from './lsn.js';
import type { ResolvedCdcRelayOptions } from './options.js';
import { CdcProgress } from './progress.js';
import type { cdcSql } from '../sql.js';
import { showCdcSlot } from './slot-sql.js';
import { ReplicationStream, type StreamedRow } from './stream.js';
import type { CdcRelayEvents } from './types.js';

export interface SessionContext {
  options: ResolvedCdcRelayOptions;
  pool: pg.Pool;
  sql: ReturnType<typeof cdcSql>;
  events: EventEmitter<CdcRelayEvents>;
  client: pg.ClientConfig;
  broker: SessionLink;
  /** Stops of the stream at a row the table refused to count, by position (marks.ts countRetry). */
  uncounted: Map<string, number>;
}

/** How a session ended: stop() asked; the broker did not take an event (retry after `delayMs`); the slot is taken. */
export type SessionEnd = { kind: 'stopped' } | { kind: 'retry'; delayMs: number } | { kind: 'standby' };

const SLOT_IN_USE = '55006';

interface Failure {
  row: StreamedRow | undefined;
  error: PublishError;
}

/**
 * One replication session: stream from the slot's acknowledged LSN, publish each outbox insert in
 * stream order on one confirm channel, mark what the broker confirmed, and acknowledge the commit
 * LSN up to which everything is confirmed and marked. The first event the broker does not take
 * ends the session (nothing after it is acknowledged); the next session gets it again from the slot.
 */
export class CdcSession {
  readonly progress = new CdcProgress();
  readonly #ctx: SessionContext;
  readonly #ending: Promise<'stop' | 'failed'>;
  #end!: (why: 'stop' | 'failed') => void;
  #accepting = true;
  #failure: Failure | undefined;
  #stream: ReplicationStream | undefined;
  #broker: BrokerSession | undefined;
  #toMark: PendingMark[] = [];
  #toFail: PendingFail[] = [];
  /** The open transaction's id and commit LSN, carried by each of its events to their mark. */
  #txn = { xid: 0, commitLsn: '0/0' };
  /** Rows whose mark the table refuses: set aside, or held back with the slot (held.ts). */
  readonly #held: HeldMarks;
  #latencies: number[] = [];
  #outstanding = 0;
  #drained: (() => void) | undefined;
  #paused = false;
  #flushing: Promise<void> | undefined;
  #timers: NodeJS.Timeout[] = [];

  constructor(ctx: SessionContext) {
    this.#ctx = ctx;
    this.#held = new HeldMarks(ctx.pool, ctx.sql, ctx.options);
    this.#ending = new Promise((resolve) => (this.#end = resolve));
  }

  /** Runs until stop(), a failed publish or a lost connection; `onActive` once the slot is ours. */
  async run(onActive: () => void): Promise<SessionEnd> {
    const { options } = this.#ctx;
    try {
      const slot = await showCdcSlot(this.#ctx.pool, options.slot);
      // Held by another relay: no broker connection for a standby's every retry (the server would refuse anyway).
      if (slot?.activePid != null) return { kind: 'standby' };
      this.#broker = await this.#ctx.broker.open(() => this.#fail(undefined, new PublishError('channel-closed')));
      const stream = new ReplicationStream(
        { client: this.#ctx.client, schema: options.schema, slot: options.slot, publication: options.publication },
        {
          begin: (lsn, xid) =>
            this.#guard(() => {
              this.progress.begin(lsn);
              this.#txn = { xid, commitLsn: lsn };
            }),
          insert: (row) => this.#guard(() => this.#publish(row)),
          commit: () => this.#guard(() => this.progress.commit()),
          keepalive: (walEnd, reply) => this.#keepalive(walEnd, reply),
        },
      );
      this.#stream = stream;
      if (slot?.confirmedFlushLsn) stream.flushTo(parseLsn(slot.confirmedFlushLsn));
      const streaming = stream.run(onActive).then(
        () => new Error('the replication stream ended'),
        (err: unknown) => err,
      );
      this.#timers.push(setInterval(() => void this.#flush(), options.markIntervalMs));
      this.#timers.push(setInterval(() => stream.sendStatus(), options.statusIntervalMs));
      const ended = await Promise.race([streaming, this.#ending]);
      if (ended === 'stop') {
        await this.#drain();
        return { kind: 'stopped' };
      }
      if (ended === 'failed') return await this.#settleFailure();
      if ((ended as { code?: string }).code === SLOT_IN_USE) return { kind: 'standby' };
      throw ended;
    } finally {
      this.#accepting = false;
      for (const timer of this.#timers) clearInterval(timer);
      await this.#stream?.stop();
      await this.#broker?.close();
    }
  }

  /** Ends the session gracefully: what is in flight gets its confirm, is marked and acknowledged. */
  stop(): void {
    this.#accepting = false;
    this.#end('stop');
  }

  get unconfirmed(): number {
    return this.progress.unconfirmed;
  }

  #guard(step: () => void): void {
    if (!this.#accepting) return;
    try {
      step();
    } catch (err) {
      // A stream out of shape (never seen): start over from the slot rather than guess.
      this.#fail(undefined, new PublishError('channel-closed', describeError(err).err));
    }
  }

  #publish(row: StreamedRow): void {
    const { options } = this.#ctx;
    this.progress.add(row.event_id, performance.now());
    if (row.status !== 'pending') {
      // Inserted as already published or failed (an import, a copy): the polling relay would not claim it either.
      this.progress.confirm(row.event_id);
      return;
    }
    let message: EncodedMessage;
    try {
      message = encodeMessage(publishableEnvelope(row), options.routingKey, row.sensitive_fields);
    } catch (err) {
      const error = new PublishError('unencodable', describeError(err).err);
      // Retrying cannot help a row consumers would reject: fail it, as the polling relay does, and go on.
      this.progress.confirm(row.event_id);
      this.#toFail.push({
        position: row.position,
        eventId: row.event_id,
        ...this.#txn,
        error: `${error.code}: ${error.message}`,
      });
      return;
    }
    const { xid, commitLsn } = this.#txn;
    const publisher = this.#broker!.publisher;
    const sentAt = performance.now();
    this.#outstanding++;
    void tracePublish(row, options.exchange, () =>
      publisher.publish(
        options.exchange,
        message.routingKey,
        message.content,
        { ...message.options, messageId: row.event_id },
        options.confirmTimeoutMs,
      ),
    ).then(
      () => {
        this.progress.confirm(row.event_id);
        this.#toMark.push({ position: row.position, eventId: row.event_id, xid, commitLsn });
        this.#latencies.push(performance.now() - sentAt);
        this.#settled();
      },
      (err: unknown) => {
        const error = err instanceof PublishError ? err : new PublishError('channel-closed', describeError(err).err);
        this.progress.reject(row.event_id);
        this.#fail(row, error);
        this.#settled();
      },
    );
    if (this.progress.unconfirmed >= options.maxInFlight && !this.#paused) {
      this.#paused = true;
      this.#stream?.pause(true);
    }
  }

  #settled(): void {
    this.#outstanding--;
    if (this.#outstanding === 0) this.#drained?.();
    if (this.#paused && this.#accepting && this.progress.unconfirmed < this.#ctx.options.maxInFlight / 2) {
      this.#paused = false;
      this.#stream?.pause(false);
    }
  }

  /** Only the first failure of a session counts: the ones after it are its consequences. */
  #fail(row: StreamedRow | undefined, error: PublishError): void {
    if (!this.#accepting) return;
    this.#accepting = false;
    this.#failure = { row, error };
    this.#end('failed');
  }

  /**
   * Caught up (nothing received waits for the broker or a mark): the server sent everything before
   * `walEnd`, so the slot may follow it, as PostgreSQL's own subscriber does. Otherwise the retained
   * WAL would grow with every other table's writes while the outbox is quiet.
   */
  #keepalive(walEnd: string, reply: boolean): void {
    const stream = this.#stream;
    if (!stream) return;
    const marking = this.#toMark.length + this.#toFail.length + this.#held.size;
    const idle = this.#accepting && this.progress.settled && marking === 0;
    if (idle && !this.#flushing) stream.flushTo(parseLsn(walEnd));
    if (reply) stream.sendStatus();
  }

  #flush(): Promise<void> {
    this.#flushing ??= this.#flushOnce().finally(() => (this.#flushing = undefined));
    return this.#flushing;
  }

  async #flushOnce(): Promise<void> {
    const { options, events, pool, sql } = this.#ctx;
    const stream = this.#stream;
    // Taken together: every event up to `ackable` is in these lists, held, or was marked before.
    const marks = this.#toMark.splice(0);
    const fails = this.#toFail.splice(0);
    const due = this.#held.due(performance.now());
    const latencies = this.#latencies.splice(0);
    const ackable = this.progress.ackable();
    const ackTo = ackable === undefined ? undefined : parseLsn(ackable) + 1n;
    const advances = ackTo !== undefined && stream !== undefined && (stream.flushed ?? -1n) < ackTo;
    if (latencies.length > 0) events.emit('confirmed', latencies);
    if (marks.length === 0 && fails.length === 0 && due.length === 0 && !advances) return;
    options.hooks.beforeAcknowledge?.(marks.map((m) => m.eventId));
    const waitingFails: PendingFail[] = [];
    let waitingMarks: PendingMark[] = [];
    try {
      for (const fail of [...fails, ...due.filter((held): held is PendingFail => 'error' in held)]) {
        const { failed, waiting, refused } = await markFailed(pool, sql, fail, options.hooks.afterIncompleteMark);
        if (refused !== undefined) await this.#held.setAside([{ item: fail, err: refused }]);
        else if (waiting) waitingFails.push(fail);
        else if (failed) {
          const info = retryInfo(failed, 'unencodable');
          options.logger.error(info, 'event cannot be published; it stays in the outbox as failed');
          events.emit('failed', info);
        }
      }
      const toMark = [...marks, ...due.filter((held) => !('error' in held))];
      if (toMark.length > 0) {
        const { marked, waiting, refused } = await markPublished(pool, sql, toMark, options.hooks.afterIncompleteMark);
        if (marked.length > 0) events.emit('published', marked);
        await this.#held.setAside(refused);
        waitingMarks = waiting;
      }
      this.#held.settle(due);
    } catch (err) {
      // Not marked, so not acknowledged either: all are tried again on the next flush.
      this.#toMark.unshift(...marks);
      this.#toFail.unshift(...fails);
      this.#held.restore(due);
      options.logger.warn({ ...describeError(err), relayId: options.relayId }, 'marking published events failed');
      if (events.listenerCount('error') > 0) events.emit('error', err as Error);
      return;
    }
    const waiting = waitingMarks.length + waitingFails.length;
    if (waiting > 0) {
      // Their transactions committed (the slot sent them) but are not visible yet: acknowledging
      // now would leave their rows pending for good, so the slot waits for the next flush.
      this.#toMark.unshift(...waitingMarks);
      this.#toFail.unshift(...waitingFails);
      options.logger.debug({ relayId: options.relayId, waiting }, 'confirmed events not visible in the outbox yet');
      return;
    }
    if (ackTo === undefined || ackable === undefined || !stream) return;
    const flushTo = this.#held.cap(ackTo);
    if ((stream.flushed ?? -1n) < flushTo) {
      stream.flushTo(flushTo);
      events.emit('acknowledged', flushTo === ackTo ? ackable : formatLsn(flushTo - 1n));
    }
  }

  /** Graceful end: read nothing more, let the publishes in flight settle, mark and acknowledge them. */
  async #drain(): Promise<void> {
    this.#stream?.pause(true);
    if (this.#outstanding > 0) {
      // Publishes held by a blocked broker connection have no confirm timeout: give up on them after
      // one; they were not acknowledged, so the next relay publishes them again.
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        this.#drained = resolve;
        timer = setTimeout(resolve, this.#ctx.options.confirmTimeoutMs);
      });
      clearTimeout(timer);
    }
    await this.#flush();
    await this.#flush();
  }

  /**
   * The broker did not take an event: mark and acknowledge what was confirmed before it, count the
   * retry on its row (never failing it), and tell the relay how long to wait before streaming again.
   */
  async #settleFailure(): Promise<SessionEnd> {
    const { options, events, pool, sql } = this.#ctx;
    const failure = this.#failure!;
    this.#stream?.pause(true);
    await this.#flush();
    await this.#flush();
    const row = failure.row;
    if (!row) {
      options.logger.warn(
        { relayId: options.relayId, code: failure.error.code, reason: failure.error.reason },
        'the broker session ended; the stream restarts from the slot after a backoff',
      );
      return { kind: 'retry', delayMs: backoffDelay(1, options.reconnectBackoff) };
    }
    const { counted, refused } = await countRetry(pool, sql, this.#ctx.uncounted, {
      row,
      code: failure.error.code,
      charged: chargedToEvent(failure.error.reason),
    });
    const info = retryInfo(counted, failure.error.reason);
    // A row the table refuses to write is retried all the same (its count kept in memory), never stalled.
    const refusal = refused === undefined ? {} : { countReason: refusalReason(refused) };
    options.logger.warn(
      { ...info, ...refusal },
      'publish not confirmed; the stream restarts at this event after a backoff',
    );
    events.emit('retry', info);
    return { kind: 'retry', delayMs: backoffDelay(counted.attempts + counted.broker_retries, options.backoff) };
  }
}
