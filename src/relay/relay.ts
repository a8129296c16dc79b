import { EventEmitter } from 'node:events';
import type pg from 'pg';
import { schemaRef } from '../runtime/identifier.js';
import { databaseFailure, leasePool, poolTarget } from '../db/pool.js';
import { PublishError } from '../runtime/errors.js';
import { describeError } from '../runtime/logger.js';
import type { JudgedFailure } from '../runtime/connection-failure.js';
import { Service } from '../runtime/service.js';
import type { ConnectionTarget } from '../runtime/connection-target.js';
import { checkSchema } from '../schema/migrate.js';
import { PartitionKeeper } from '../schema/partition-keeper.js';
import type { TransportPublisher } from '../transport/transport.js';
import { encodeMessage } from '../transport/wire.js';
import { resolveRelayOptions, type RelayOptions, type ResolvedRelayOptions } from './options.js';
import { relaySql, type ClaimedRow } from './sql.js';
import { createClaimer, type Claimer } from './claim.js';
import { cycleResult, settleBatch, type OutcomeContext } from './outcomes.js';
import { OutboxListener } from './wakeup.js';
import { BrokerLink } from './broker-link.js';
import { setAsideContext } from './set-aside.js';
import { publishableEnvelope } from './row.js';
import type { RelayCycleResult, RelayEvents } from './types.js';
import { tracePublish } from '../telemetry/index.js';
export type { RelayCycleResult, RelayEvents, RelayRetryInfo } from './types.js';

/**
 * Moves committed outbox rows to RabbitMQ: claim (short transaction, SKIP LOCKED, lease),
 * publish on a confirm channel with `mandatory`, then mark only what the broker acked and
 * did not return. A crash anywhere after the publish leads to a re-publish with the same
 * eventId, never to a loss.
 */
export class Relay extends EventEmitter<RelayEvents> {
  readonly options: ResolvedRelayOptions;
  readonly #pool: pg.Pool;
  readonly #releasePool: () => Promise<void>;
  readonly #sql: ReturnType<typeof relaySql>;
  readonly #outcomes: OutcomeContext;
  readonly #claimer: Claimer;
  readonly #listener: OutboxListener | undefined;
  readonly #broker: BrokerLink;
  readonly #service: Service;
  readonly #databaseTarget: ConnectionTarget;
  /** Batches sent and waiting for their confirms and marks. */
  readonly #inFlight = new Set<Promise<void>>();
  #schemaChecked = false;
  #databaseUp = false;
  readonly #partitions: PartitionKeeper;
  /** Throws a typed error for options that can never work (ConfigError, an unusable database or AMQP URL). */
  constructor(options: RelayOptions = {}) {
    super();
    this.options = resolveRelayOptions(options);
    this.#broker = new BrokerLink(this.options, {
      blocked: (reason) => this.#brokerBlocked(reason),
      unblocked: () => this.#brokerUnblocked(),
    });
    const lease = leasePool(this.options.pool, {
      connectionString: this.options.connectionString,
      poolMode: this.options.poolMode,
      max: this.options.concurrency + 1,
      applicationName: 'converge-relay',
      logger: this.options.logger,
    });
    this.#pool = lease.pool;
    this.#partitions = new PartitionKeeper(lease.pool, schemaRef(this.options.schema), this.options.logger);
    const direct = this.#directPool();
    this.#databaseTarget = poolTarget(lease.pool);
    this.#service = new Service({
      component: `relay ${this.options.relayId}`,
      what: 'relay cycle',
      logger: this.options.logger,
      databaseTarget: () => this.#databaseTarget,
      reconnectBackoff: this.options.reconnectBackoff,
      handleSignals: this.options.handleSignals,
      emitter: this,
      interrupt: () => this.#broker.interrupt(),
      close: async () => {
        await this.#broker.close();
        await this.#partitions.settled();
        await this.#claimer.close();
        await this.#releasePool();
      },
    });
    this.#releasePool = async () => {
      await lease.release();
      await direct?.release();
    };
    // What needs a session runs where one lasts: the direct connection, else the pool unless a pooler shares it out.
    const sessionPool = direct?.pool ?? (this.options.poolMode === 'session' ? this.#pool : undefined);
    const schema = schemaRef(this.options.schema);
    this.#sql = relaySql(schema);
    const setAside = setAsideContext(this.#pool, this.#sql, this.options);
    this.#claimer = createClaimer({
      pool: this.#pool,
      sessionPool,
      sql: this.#sql,
      options: this.options,
      ownership: (owned) => this.#ownership(owned),
      setAside,
    });
    this.#outcomes = {
      pool: this.#pool,
      sql: this.#sql,
      options: this.options,
      events: this,
      owner: this.#claimer.owner,
      setAside,
    };
    if (this.options.listen && sessionPool)
      this.#listener = new OutboxListener(sessionPool, (s) => s === schema.name && this.wake(), this.options.logger);
    else if (this.options.listen)
      this.options.logger.info(
        { relayId: this.options.relayId, pollIntervalMs: this.options.pollIntervalMs },
        'poolMode transaction: LISTEN needs a session, so the relay polls (give directConnectionString to be woken by NOTIFY)',
      );
  }

  /** At most two connections straight to PostgreSQL: the LISTEN one and the exclusive claim's lock holder. */
  #directPool() {
    const url = this.options.directConnectionString;
    if (url === undefined) return undefined;
    return leasePool(undefined, {
      connectionString: url,
      max: 2,
      applicationName: 'converge-relay',
      logger: this.options.logger,
    });
  }

  /** Starts the background loop and returns at once. */
  start(): this {
    this.#service.start((succeeded) => this.#step(succeeded), {
      onFailure: (judged) => this.#afterFailure(judged),
      afterLoop: async () => {
        await Promise.all(this.#inFlight);
        await this.#listener?.close();
      },
    });
    return this;
  }

  /**
   * Resolves after the first cycle that reached both PostgreSQL and RabbitMQ (schema checked).
   * Rejects with the typed error of a permanent misconfiguration (ConnectionConfigError,
   * SchemaNotMigratedError), after which the relay has stopped; with `timeoutMs`, rejects with
   * ReadyTimeoutError naming the last failure while the relay keeps retrying.
   */
  ready(options: { timeoutMs?: number } = {}): Promise<void> {
    return this.#service.readiness.wait(options);
  }

  /** The last claim or mark reached PostgreSQL (false until the first one did, and after a failed one). */
  get databaseReachable(): boolean {
    return !this.#service.stopping && this.#databaseUp;
  }

  /** The permanent misconfiguration that stopped the relay, if one did. */
  get failure(): Error | undefined {
    return this.#service.failure;
  }

  /** The pool it claims and marks with, for read-only companions such as the outbox gauges. */
  get pool(): pg.Pool {
    return this.#pool;
  }

  /** Running with an open confirm channel to the broker. */
  get connected(): boolean {
    return !this.#service.stopping && this.#broker.open;
  }

  /**
   * The broker blocks the relay's connection (a memory or disk alarm): the relay claims nothing
   * until it unblocks, and publishes already sent wait without a confirm timeout.
   */
  get brokerBlocked(): boolean {
    return !this.#service.stopping && this.#broker.blocked;
  }

  /**
   * Lets the batches in flight finish (so confirmed events get marked), then closes everything it
   * opened; a silent broker costs at most the confirm timeout plus a short close grace.
   */
  stop(): Promise<void> {
    return this.#service.stop();
  }

  /** Cuts the poll sleep short: rows were committed (a listener shared by several relays calls it). */
  wake(): void {
    this.#service.idle.wake();
  }

  /** One claim → publish → mark cycle, awaited whole. Callable directly in tests and tools. */
  async runOnce(): Promise<RelayCycleResult> {
    return (await this.#startCycle()).done;
  }

  /**
   * Claims and sends a batch; `done` settles once the broker answered for every message and
   * the rows are marked or rescheduled. Splitting the two lets the loop claim and send the
   * next batch while this one still waits for its confirms.
   */
  async #startCycle(): Promise<{ claimed: number; standby?: true; done: Promise<RelayCycleResult> }> {
    // Taken before the claim: rows are claimed only while a channel is open.
    const taken = await this.#broker.publisher();
    await this.#checkSchemaOnce();
    const claimed = await this.#claimer.claim().catch((err: unknown) => {
      throw databaseFailure(err, this.#databaseTarget);
    });
    this.#databaseUp = true;
    if (!this.#service.readiness.settled) this.#service.readiness.resolve();
    const rows = claimed === 'standby' ? [] : claimed;
    const result = cycleResult(rows.length);
    if (rows.length === 0)
      return { claimed: 0, ...(claimed === 'standby' && { standby: true }), done: Promise.resolve(result) };
    const publisher = await this.#broker.latest(taken);
    // Each publish is written to the channel synchronously here, in claim order.
    const sentAt = performance.now();
    const outcomes = Promise.all(
      rows.map((row) => tracePublish(row, this.options.exchange, () => this.#publishRow(publisher, row, sentAt))),
    );
    return { claimed: rows.length, done: this.#finishCycle(rows, outcomes, result, { publisher, sentAt }) };
  }

  async #finishCycle(
    rows: ClaimedRow[],
    pending: Promise<(PublishError | number)[]>,
    result: RelayCycleResult,
    sent: { publisher: TransportPublisher; sentAt: number },
  ): Promise<RelayCycleResult> {
    try {
      return await settleBatch(this.#outcomes, this.#broker, { rows, outcomes: await pending, result, ...sent });
    } finally {
      this.#claimer.settled(rows);
    }
  }

  /**
   * The confirm latency in ms, or why the broker did not take the event. Written to the channel
   * before it returns; no async frame of its own, as it runs once per event.
   */
  #publishRow(publisher: TransportPublisher, row: ClaimedRow, sentAt: number): Promise<PublishError | number> {
    let message: ReturnType<typeof encodeMessage>;
    try {
      message = encodeMessage(publishableEnvelope(row), this.options.routingKey, row.sensitive_fields);
    } catch (err) {
      return Promise.resolve(new PublishError('unencodable', describeError(err).err));
    }
    try {
      // The options carry the eventId as messageId (encodeMessage), which return matching relies on.
      return publisher
        .publish(
          this.options.exchange,
          message.routingKey,
          message.content,
          message.options,
          this.options.confirmTimeoutMs,
        )
        .then(() => performance.now() - sentAt, asPublishError);
    } catch (err) {
      // A transport that throws instead of rejecting.
      return Promise.resolve(asPublishError(err));
    }
  }

  /**
   * One turn of the claiming loop, which keeps up to `concurrency` batches waiting for confirms at
   * once: as soon as a batch is sent, the next claim runs. A finished batch wakes the loop only if
   * its mark made a waiting later version of an aggregate claimable; new inserts wake it by NOTIFY.
   */
  async #step(succeeded: () => void): Promise<void> {
    const idle = this.#service.idle;
    if (this.#inFlight.size >= this.options.concurrency) return void (await Promise.race(this.#inFlight));
    // The broker reads nothing from a blocked connection: a claim now would only sit in a lease.
    if (this.#broker.blocked) return idle.sleep(this.options.pollIntervalMs);
    if (!this.#schemaChecked) {
      // Broker, then schema, then LISTEN: as the consumer, and so a wrong database fails with its
      // reason rather than a listener warning, and NOTIFY is heard from the first claim on.
      await this.#broker.publisher();
      await this.#checkSchemaOnce();
    }
    await this.#listener?.ensure();
    this.#partitions.tick();
    const cycle = await this.#startCycle();
    succeeded();
    if (cycle.standby) return idle.sleep(this.options.standbyRetryMs);
    if (cycle.claimed === 0) {
      this.emit('idle');
      return idle.sleep(this.options.pollIntervalMs);
    }
    const tracked: Promise<void> = cycle.done
      .then(
        (done) => {
          if (done.unblocked) idle.wake();
        },
        // A batch's failure is judged as a cycle's, without a backoff: the loop goes on claiming.
        async (err: unknown) => this.#afterFailure(this.#service.attemptFailed(err, 1, 0)),
      )
      .finally(() => this.#inFlight.delete(tracked));
    this.#inFlight.add(tracked);
  }

  /** What a failed cycle says about the services: the database is down, the channel is unusable. */
  async #afterFailure(judged: JudgedFailure): Promise<void> {
    if (judged.failure?.service !== 'RabbitMQ') this.#databaseUp = false;
    // A database hiccup says nothing about the broker: keep the channel other cycles are using.
    if (judged.failure?.service !== 'PostgreSQL') await this.#broker.discard();
  }

  #ownership(owned: boolean): void {
    const fields = { relayId: this.options.relayId, schema: this.options.schema };
    if (owned) this.options.logger.info(fields, 'holding the relay lock: this relay publishes the outbox');
    else this.options.logger.info(fields, 'relay lock held by another relay: waiting as standby');
    this.emit(owned ? 'active' : 'standby');
  }

  #brokerBlocked(reason: string | undefined): void {
    this.options.logger.warn(
      { relayId: this.options.relayId, reason: reason ?? 'unknown' },
      'RabbitMQ blocked the connection (resource alarm): publishing paused, no attempts counted, until it clears',
    );
    this.emit('blocked', reason);
  }

  #brokerUnblocked(): void {
    // stop() closing a blocked connection ends the block too, but nothing resumes then.
    if (!this.#service.stopping)
      this.options.logger.info(
        { relayId: this.options.relayId },
        'RabbitMQ unblocked the connection: publishing resumes',
      );
    this.emit('unblocked');
    this.#service.idle.wake();
  }

  async #checkSchemaOnce(): Promise<void> {
    if (this.#schemaChecked) return;
    await checkSchema(this.#pool, this.options.schema);
    this.#schemaChecked = true;
  }
}

/** Why a publish failed, as the PublishError the outcome handling reads. */
function asPublishError(err: unknown): PublishError {
  return err instanceof PublishError ? err : new PublishError('channel-closed', describeError(err).err);
}

/** Creates and starts a relay. */
export function startRelay(options: RelayOptions = {}): Relay {
  return new Relay(options).start();
}
