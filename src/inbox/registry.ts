import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type pg from 'pg';
import { schemaRef } from '../runtime/identifier.js';
import { describeError, type Logger } from '../runtime/logger.js';
import { acceptedVersions, formatAccepts, type AcceptsSource } from './accepts.js';
import { inboxSql } from './sql.js';

/** How often a running consumer refreshes its registry row. */
export const REGISTRY_HEARTBEAT_MS = 60_000;

/**
 * A row not refreshed for this long belongs to an instance that died without stopping (a crash, a
 * kill): it no longer counts as running. Two and a half heartbeats, so one slow beat is not a death.
 */
export const REGISTRY_LOST_AFTER_MS = (REGISTRY_HEARTBEAT_MS * 5) / 2;

/** How long a graceful stop waits to mark its row stopped. */
const STOP_WRITE_MS = 2_000;

export interface RegistrationTarget extends AcceptsSource {
  consumer: string;
  queue: string;
  schema: string;
  logger: Logger;
}

/**
 * One consumer instance's row in the schema registry (`consumer_schemas`): which versions of which
 * event types this code reads. Written when a session subscribes, refreshed by a timer while it
 * runs, marked stopped by a graceful stop. Never on the delivery path: one statement per session
 * and per minute, whatever the traffic.
 */
export class ConsumerRegistration {
  readonly accepts: string;
  /** Host, process and a random part: one row per Consumer object, readable by an operator. */
  readonly instance = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  readonly #sql: ReturnType<typeof inboxSql>;
  readonly #target: RegistrationTarget;
  #timer: NodeJS.Timeout | undefined;
  #written = false;

  constructor(target: RegistrationTarget) {
    this.#target = target;
    this.accepts = formatAccepts(acceptedVersions(target));
    this.#sql = inboxSql(schemaRef(target.schema));
  }

  /** Writes the row (a failure fails the session, which retries), prunes old ones, starts the heartbeat. */
  async start(pool: pg.Pool): Promise<void> {
    await this.#write(pool);
    this.#written = true;
    await pool.query(this.#sql.pruneInstances, [this.#target.consumer, this.instance, REGISTRY_LOST_AFTER_MS]);
    this.#stopBeating();
    this.#timer = setInterval(() => void this.#beat(pool), REGISTRY_HEARTBEAT_MS);
    this.#timer.unref();
  }

  /** The session ended: no heartbeat until the next one starts (the row ages meanwhile). */
  pause(): void {
    this.#stopBeating();
  }

  /** A graceful stop: the row says so, and stops counting as a running instance at once. */
  async stop(pool: pg.Pool): Promise<void> {
    this.#stopBeating();
    if (!this.#written) return;
    // Bounded: a database that does not answer must not hold up stop(); the row then ages out.
    let timer: NodeJS.Timeout | undefined;
    const gaveUp = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), STOP_WRITE_MS)));
    const written = pool.query(this.#sql.stopInstance, [this.#target.consumer, this.instance]).then(
      () => 'ok' as const,
      (err: unknown) => err,
    );
    const outcome = await Promise.race([written, gaveUp]);
    clearTimeout(timer);
    if (outcome !== 'ok')
      this.#target.logger.warn(
        { ...(outcome === 'timeout' ? { err: 'timeout' } : describeError(outcome)), consumer: this.#target.consumer },
        'schema registry: could not mark this instance stopped; it stops counting as running after a few minutes',
      );
  }

  #stopBeating(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  async #write(pool: pg.Pool): Promise<void> {
    const { consumer, queue } = this.#target;
    await pool.query(this.#sql.registerInstance, [consumer, this.instance, queue, this.accepts]);
  }

  /** A missed heartbeat is not worth stopping for: the next one, or the next session, writes again. */
  async #beat(pool: pg.Pool): Promise<void> {
    try {
      await this.#write(pool);
    } catch (err) {
      this.#target.logger.warn(
        { ...describeError(err), consumer: this.#target.consumer },
        'schema registry heartbeat failed',
      );
    }
  }
}
