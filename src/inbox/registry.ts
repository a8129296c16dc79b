import type pg from 'pg';
import { schemaRef } from '../runtime/identifier.js';
import { describeError, type Logger } from '../runtime/logger.js';
import { acceptedVersions, formatAccepts, type AcceptsSource } from './accepts.js';
import { inboxSql } from './sql.js';

/**
 * How often a running consumer refreshes its registry row. `converge compat` counts a consumer
 * as live while its row is younger than the live window (24 h by default), far above this.
 */
export const REGISTRY_HEARTBEAT_MS = 60_000;

export interface RegistrationTarget extends AcceptsSource {
  consumer: string;
  queue: string;
  schema: string;
  logger: Logger;
}

/**
 * A consumer's entry in the schema registry (`consumer_schemas`): which versions of which event
 * types it reads, written when a session starts and refreshed by a timer while it runs. Never on
 * the delivery path: one statement per session and per minute, whatever the traffic.
 */
export class ConsumerRegistration {
  readonly accepts: string;
  readonly #statement: string;
  #timer: NodeJS.Timeout | undefined;

  constructor(private readonly target: RegistrationTarget) {
    this.accepts = formatAccepts(acceptedVersions(target));
    this.#statement = inboxSql(schemaRef(target.schema)).registerAccepts;
  }

  /** Writes the entry (a failure fails the session, which retries) and starts the heartbeat. */
  async start(pool: pg.Pool): Promise<void> {
    await this.#write(pool);
    this.stop();
    this.#timer = setInterval(() => void this.#beat(pool), REGISTRY_HEARTBEAT_MS);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  async #write(pool: pg.Pool): Promise<void> {
    await pool.query(this.#statement, [this.target.consumer, this.target.queue, this.accepts]);
  }

  /** A missed heartbeat is not worth stopping for: the next one, or the next session, writes again. */
  async #beat(pool: pg.Pool): Promise<void> {
    try {
      await this.#write(pool);
    } catch (err) {
      this.target.logger.warn(
        { ...describeError(err), consumer: this.target.consumer },
        'schema registry heartbeat failed',
      );
    }
  }
}
