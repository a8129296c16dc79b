import type pg from 'pg';
import { OUTBOX_CHANNEL } from '../runtime/defaults.js';
import type { Logger } from '../runtime/logger.js';
import { describeError } from '../runtime/logger.js';
import { classifyDatabaseError, failureFields } from '../runtime/connection-failure.js';
import { poolTarget } from '../db/pool.js';

/**
 * Holds one pooled connection in LISTEN on the outbox channel and calls `onInsert` with the
 * schema when a transaction that inserted into an outbox commits (the trigger's payload): a
 * relay wakes for its own schema, and the relays of several tenants share one listener
 * (src/tenants). Polling stays as the fallback: a lost listener only costs latency, never an event.
 */
export class OutboxListener {
  readonly #pool: pg.Pool;
  readonly #onInsert: (schema: string) => void;
  readonly #logger: Logger;
  #client: pg.PoolClient | undefined;
  #connecting: Promise<void> | undefined;
  #closed = false;

  /** Service, endpoint, code and reason of a listener failure, for its log line. */
  #fields(err: unknown): Record<string, unknown> {
    const failure = classifyDatabaseError(err, poolTarget(this.#pool));
    return failure ? { ...failureFields(failure), listener: true } : { ...describeError(err), listener: true };
  }

  constructor(pool: pg.Pool, onInsert: (schema: string) => void, logger: Logger) {
    this.#pool = pool;
    this.#onInsert = onInsert;
    this.#logger = logger;
  }

  /** Connects if not connected; failures are logged and retried on the next call. */
  ensure(): Promise<void> {
    if (this.#client || this.#closed) return Promise.resolve();
    this.#connecting ??= this.#connect().finally(() => (this.#connecting = undefined));
    return this.#connecting;
  }

  async close(): Promise<void> {
    this.#closed = true;
    await this.#connecting;
    this.#drop();
  }

  async #connect(): Promise<void> {
    let client: pg.PoolClient | undefined;
    try {
      client = await this.#pool.connect();
      client.on('notification', (message) => {
        if (message.channel === OUTBOX_CHANNEL && message.payload !== undefined) this.#onInsert(message.payload);
      });
      client.on('error', (err) => {
        this.#logger.warn(this.#fields(err), 'outbox listener lost; falling back to polling until it reconnects');
        this.#drop(err);
      });
      await client.query(`LISTEN ${OUTBOX_CHANNEL}`);
      if (this.#closed) client.release();
      else this.#client = client;
    } catch (err) {
      this.#logger.warn(this.#fields(err), 'could not start outbox listener; polling only');
      client?.release(err as Error);
    }
  }

  #drop(err?: Error): void {
    const client = this.#client;
    this.#client = undefined;
    // A listening connection must not go back to the pool still subscribed.
    client?.release(err ?? new Error('listener closed'));
  }
}
