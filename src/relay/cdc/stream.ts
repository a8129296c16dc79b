import type pg from 'pg';
import { LogicalReplicationService, PgoutputPlugin, type Pgoutput } from 'pg-logical-replication';
import type { OutboxEnvelopeRow } from '../sql.js';
import { formatLsn } from './lsn.js';

/** An outbox insert as the stream decodes it: the same columns, types and parsers node-postgres gives the polling relay. */
export type StreamedRow = OutboxEnvelopeRow & {
  position: string;
  status: 'pending' | 'published' | 'failed';
  attempts: number;
  broker_retries: number;
};

/** What one replication session reports, in stream order and synchronously, so stream order is publish order. */
export interface StreamHandlers {
  /** `xid`: the transaction's id (32 bits, as pgoutput sends it), to tell when its rows are visible. */
  begin(commitLsn: string, xid: number): void;
  insert(row: StreamedRow): void;
  commit(): void;
  /** A keepalive: the server has sent everything up to `walEnd`. */
  keepalive(walEnd: string, replyRequested: boolean): void;
}

export interface StreamTarget {
  client: pg.ClientConfig;
  schema: string;
  slot: string;
  publication: string;
}

/**
 * One replication connection reading `slot` through `publication` with pgoutput. Only inserts
 * into `<schema>.outbox` are passed on. Acknowledgement is manual and only ever what the caller
 * hands to `flushTo`: the library's own periodic status update is off, because it reports the
 * last *received* LSN as flushed, which would let PostgreSQL drop events not yet confirmed.
 */
export class ReplicationStream {
  readonly #service: LogicalReplicationService;
  readonly #target: StreamTarget;
  readonly #handlers: StreamHandlers;
  #flushTarget: bigint | undefined;
  #open = true;

  constructor(target: StreamTarget, handlers: StreamHandlers) {
    this.#target = target;
    this.#handlers = handlers;
    this.#service = new LogicalReplicationService(target.client, {
      acknowledge: { auto: false, timeoutSeconds: 0 },
      flowControl: { enabled: false },
    });
    this.#service.on('data', (_lsn: string, message: Pgoutput.Message) => this.#onMessage(message));
    this.#service.on('heartbeat', (lsn: string, _timestamp: number, replyRequested: boolean) => {
      if (this.#open) this.#handlers.keepalive(lsn, replyRequested);
    });
    // Connection errors also reject run(); this listener only keeps EventEmitter2 from throwing.
    this.#service.on('error', () => undefined);
  }

  /**
   * Streams from the slot's confirmed position until stop(): resolves then, rejects when the server
   * or the connection ends it (SQLSTATE 55006 when another relay holds the slot). `onStart` runs
   * once the server accepted START_REPLICATION.
   */
  run(onStart: () => void): Promise<void> {
    this.#service.once('start', onStart);
    const plugin = new PgoutputPlugin({ protoVersion: 1, publicationNames: [this.#target.publication] });
    // '0/0': let the server start at the slot's confirmed_flush_lsn, never at what this process last received.
    return this.#service.subscribe(plugin, this.#target.slot, '0/0').then(() => undefined);
  }

  /** From now on report `flush` (the position after the last acknowledged commit) to the server. */
  flushTo(flush: bigint): void {
    if (this.#flushTarget !== undefined && flush <= this.#flushTarget) return;
    this.#flushTarget = flush;
    this.sendStatus();
  }

  get flushed(): bigint | undefined {
    return this.#flushTarget;
  }

  /** Sends a standby status update with the flush position (also the keepalive wal_sender_timeout needs). */
  sendStatus(): void {
    if (this.#flushTarget === undefined || !this.#open) return;
    // The library reports acknowledge(x) as flushed up to x + 1.
    void this.#service.acknowledge(formatLsn(this.#flushTarget - 1n)).catch(() => undefined);
  }

  /** Backpressure: stops (or resumes) reading the socket; PostgreSQL then waits with the rest. */
  pause(paused: boolean): void {
    const stream = (this.#service as unknown as { _connection?: { stream?: NodeJS.ReadableStream } })._connection
      ?.stream;
    if (paused) stream?.pause();
    else stream?.resume();
  }

  /** Closes the replication connection; whatever was not acknowledged is resent to the next session. */
  async stop(): Promise<void> {
    this.#open = false;
    await this.#service.destroy().catch(() => undefined);
  }

  #onMessage(message: Pgoutput.Message): void {
    if (!this.#open) return;
    switch (message.tag) {
      case 'begin':
        this.#handlers.begin(message.commitLsn ?? '0/0', message.xid);
        return;
      case 'insert':
        if (message.relation.schema === this.#target.schema && message.relation.name === 'outbox')
          this.#handlers.insert(message.new as StreamedRow);
        return;
      case 'commit':
        this.#handlers.commit();
        return;
      default:
        return;
    }
  }
}
