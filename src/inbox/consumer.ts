import { EventEmitter } from 'node:events';
import type pg from 'pg';
import { describeError } from '../runtime/logger.js';
import { classifyDatabaseError, failureFields } from '../runtime/connection-failure.js';
import { Service } from '../runtime/service.js';
import { poolTarget } from '../db/pool.js';
import { checkSchema } from '../schema/migrate.js';
import { transportFor } from '../transport/rabbitmq.js';
import type { Transport, TransportConnection, TransportDelivery } from '../transport/transport.js';
import { resolveConsumerOptions, type ConsumerOptions, type ResolvedConsumerOptions } from './options.js';
import type { UntypedEvents } from '../envelope/events.js';
import { RampAdmission, RampGate } from './ramp.js';
import { parkForRetry } from './retry-copy.js';
import { acknowledgeBatch, requeueBatch } from './acknowledge.js';
import { Settler } from './settle.js';
import { PublishError } from '../runtime/errors.js';
import { schemaRef } from '../runtime/identifier.js';
import { BatchPump } from './batch-pump.js';
import { DeadLetterIntake } from './dead-letter.js';
import { SessionBroker } from './session-broker.js';
import { SettlementReport } from './settlement-report.js';
import { ConsumerRegistration } from './registry.js';
import { DeliveryProcessor, ProcessorSetup } from './processor.js';
import type { AggregateRef, ConsumerEvents, ConsumerStats, DrainedEvent, Settlement } from './types.js';

export type { ConsumerEvents, ConsumerStats } from './types.js';

/**
 * Subscribes a durable queue with manual acks and bounded prefetch. Each delivery runs
 * through the DeliveryProcessor (one local transaction) and is acked only after that
 * transaction committed. A delivery that must wait (version gap, outage, handler error)
 * is copied to `<queue>.retry` with a per-message expiry and dead-lettered back later; the
 * original is acked only once the broker confirmed the copy, so waiting never blocks the
 * queue behind it and never loses the event.
 */
export class Consumer<M extends object = UntypedEvents> extends EventEmitter<ConsumerEvents> {
  readonly options: ResolvedConsumerOptions;
  readonly #report = new SettlementReport(this);
  readonly stats: ConsumerStats = this.#report.stats;
  readonly #processor: DeliveryProcessor;
  readonly #service: Service;
  readonly #transport: Transport;
  #broker: SessionBroker | undefined;
  /** Subscribed in the current session. */
  #subscribed = false;
  readonly #pump: BatchPump;
  #sessionEnded: (() => void) | undefined;
  #schemaChecked = false;
  readonly #ramp: RampAdmission | undefined;
  #sessions = 0;
  readonly #registration: ConsumerRegistration;
  /** Quarantines what cannot be copied to the retry queue (acknowledge.ts); the processor's own settles the rest. */
  readonly #settler: Settler;

  /** `M`, the event map, is inferred from `options.events` (or given) and types the handlers. */
  constructor(options: ConsumerOptions<M>) {
    super();
    // Validated once, here (a missing handler included); the processor takes the result as it is.
    this.options = resolveConsumerOptions(options);
    this.#transport = transportFor(this.options);
    this.#processor = new DeliveryProcessor(
      new ProcessorSetup(this.options, (drained) => this.#settleDrained(drained)),
    );
    this.#service = new Service({
      component: `consumer ${this.options.queue}`,
      what: 'consumer session',
      logger: this.options.logger,
      databaseTarget: () => poolTarget(this.pool),
      reconnectBackoff: this.options.reconnectBackoff,
      handleSignals: this.options.handleSignals,
      emitter: this,
      fields: { queue: this.options.queue },
      interrupt: () => {
        this.#sessionEnded?.();
        // Not subscribed yet (connecting, declaring): nothing to finish, and the broker may never answer.
        if (!this.#subscribed) this.#broker?.kill.abort();
      },
      close: async () => {
        await this.#registration.stop(this.pool);
        await this.#processor.close();
      },
    });
    if (this.options.rampUp)
      this.#ramp = new RampAdmission(new RampGate(this.options.rampUp), (limit) => this.#reportRamp(limit));
    this.#pump = new BatchPump(this.options.batchSize, this.#ramp);
    this.#registration = new ConsumerRegistration(this.options);
    const { consumer, backoff, logger } = this.options;
    this.#settler = new Settler({ pool: this.pool, schema: schemaRef(this.options.schema), consumer, backoff, logger });
  }

  start(): this {
    this.#service.start(async (connected) => {
      try {
        await this.#session(connected);
      } finally {
        await this.#closeSession();
      }
    });
    return this;
  }

  /** The pool its transactions run on, for read-only companions such as the reorder-buffer gauges. */
  get pool(): pg.Pool {
    return this.#processor.pool;
  }

  /** Running with an active subscription on the broker. */
  get subscribed(): boolean {
    return !this.#service.stopping && this.#subscribed;
  }

  /**
   * Resolves once the schema is checked, queues are declared and the subscription is active for
   * the first time. Rejects with the typed error of a permanent misconfiguration (wrong password,
   * role, database, vhost, unmigrated schema), after which the consumer has stopped; with
   * `timeoutMs`, rejects with ReadyTimeoutError naming the last failure while it keeps retrying.
   */
  ready(options: { timeoutMs?: number } = {}): Promise<void> {
    return this.#service.readiness.wait(options);
  }

  /** The permanent misconfiguration that stopped the consumer, if one did. */
  get failure(): Error | undefined {
    return this.#service.failure;
  }

  /** Drains parked events that can apply now (after a reconcile or a rebuild moved their projection). */
  drainReady(): Promise<number> {
    return this.#processor.drainReady();
  }

  /** Drains the parked events of one aggregate that can apply now (repairGaps in reconcile/ calls it). */
  drainAggregate(aggregate: AggregateRef): Promise<number> {
    return this.#processor.drainAggregate(aggregate);
  }

  /** Stops taking deliveries, finishes the one in progress (commit, then ack), closes everything. */
  stop(): Promise<void> {
    return this.#service.stop();
  }

  /** One connection's lifetime: declare, subscribe, then wait for the connection to end or stop(). */
  async #session(onConnected: () => void): Promise<void> {
    const ended = new Promise<void>((resolve) => (this.#sessionEnded = resolve));
    const broker = new SessionBroker();
    this.#broker = broker;
    broker.connection = await this.#transport
      .connect({
        name: `converge-consumer ${this.options.queue}`,
        signal: broker.kill.signal,
        onClose: () => this.#sessionEnded?.(),
      })
      .catch((err: unknown) => {
        throw this.#transport.failure(err);
      });
    if (!this.#schemaChecked) {
      await checkSchema(this.pool, this.options.schema);
      // Before any delivery: a role that may not read the key is a misconfiguration, reported as one.
      await this.#processor.headerKey.get();
      this.#schemaChecked = true;
    }
    // Before subscribing: `converge compat` knows what this code reads before it reads anything.
    await this.#registration.start(this.pool);
    await this.#subscribe(broker, broker.connection).catch((err: unknown) => {
      throw this.#transport.failure(err);
    });
    // Parked events whose predecessor was applied (or repaired) while nobody was listening.
    await this.#processor.drainReady();
    onConnected();
    if (!this.#service.readiness.settled) this.#service.readiness.resolve();
    if (this.#service.stopping) return;
    await ended;
  }

  async #subscribe(broker: SessionBroker, connection: TransportConnection): Promise<void> {
    if (this.options.declare) await connection.declareQueues(this.options);
    broker.retryPublisher = await connection.openPublisher();
    broker.deadLetters = await this.#openDeadLetters(connection);
    this.#pump.discard();
    // A new connection after a lost one: the backlog built up meanwhile comes at a growing rate.
    // Begun before subscribing, so no delivery of the backlog slips in ahead of the ramp.
    if (++this.#sessions > 1) this.#ramp?.begin();
    broker.subscription = await connection.subscribe(
      this.options.queue,
      (message) => {
        this.#processor.prepareAhead(message);
        this.#pump.push(message, (batch) => this.#handleBatch(batch));
      },
      {
        prefetch: this.options.prefetch,
        // The broker cancelled us (queue deleted, or moved on a cluster) or the channel closed: subscribe again.
        onCancelled: () => {
          if (this.#sessionEnded)
            this.options.logger.warn(
              { queue: this.options.queue },
              'subscription cancelled by the broker; resubscribing',
            );
          this.#sessionEnded?.();
        },
      },
    );
    this.#subscribed = true;
  }

  /** queueType 'quorum': what the broker dead-lettered past the delivery limit is quarantined (dead-letter.ts). */
  async #openDeadLetters(connection: TransportConnection): Promise<DeadLetterIntake | undefined> {
    if (!this.options.deadQueue) return undefined;
    return DeadLetterIntake.open(connection, this.options.deadQueue, this.options, this.pool, {
      headerKey: this.#processor.headerKey,
      onQuarantined: (settlement) => this.#report.settled(settlement),
      onLost: () => this.#sessionEnded?.(),
    });
  }

  #reportRamp(limit: number | null): void {
    this.options.logger.info(
      { queue: this.options.queue, limitPerSecond: limit },
      limit === null ? 'recovered: rate limit lifted' : 'recovering: processing rate limited',
    );
    this.emit('recovering', limit);
  }

  async #handleBatch(messages: TransportDelivery[]): Promise<void> {
    let settlements: Settlement[];
    try {
      settlements = await this.#processor.processBatch(messages);
    } catch (err) {
      // Processing itself broke (not a handler error): leave the deliveries for redelivery. No retry relies
      // on it; with quorum queues a delivery that keeps breaking it ends in <queue>.dead, so in quarantine.
      // The database going away outside a delivery's transaction (the drain of parked events after a
      // commit, say) is an outage like any other, not a defect: the redelivered copies wait for it.
      const outage = classifyDatabaseError(err, poolTarget(this.pool));
      if (outage?.kind === 'unavailable') {
        this.options.logger.warn(failureFields(outage), 'database unavailable while processing; deliveries requeued');
        this.#ramp?.begin();
      } else this.options.logger.error(describeError(err), 'delivery processing failed unexpectedly');
      requeueBatch(messages);
      return;
    }
    try {
      await this.options.hooks.afterCommit?.(settlements);
    } catch (err) {
      // As if the process died between commit and ack: no ack, the session ends, the broker redelivers.
      this.options.logger.warn(describeError(err), 'afterCommit hook failed; deliveries left unacknowledged');
      this.#sessionEnded?.();
      return;
    }
    // A retry's delivery is acked only once its copy in the retry queue is confirmed (acknowledge.ts).
    const settled = await acknowledgeBatch(messages, settlements, await this.#broker?.retryChannel(), {
      ...this.options,
      quarantineUncopyable: (delivery, settlement, error) => this.#settler.uncopyable(delivery, settlement, error),
    });
    // The database is failing: when it is back, the backlog must not hit it all at once.
    if (settlements.some((s) => s.action === 'retry' && s.reason === 'database-unavailable')) this.#ramp?.begin();
    for (const settlement of settled) this.#report.settled(settlement);
  }

  /**
   * Drained events were acked when they were parked. One that must be retried goes back to
   * the broker (a confirmed copy in the retry queue); the eventIds returned leave the buffer. One
   * whose copy amqplib cannot encode is quarantined instead, and leaves the buffer with its row.
   */
  async #settleDrained(drained: DrainedEvent[]): Promise<string[]> {
    const handedBack: string[] = [];
    for (const { delivery, settlement } of drained) {
      if (settlement.action !== 'retry') {
        this.#report.drained(settlement);
        continue;
      }
      const { eventId } = settlement;
      const parked =
        eventId === null
          ? 'failed'
          : await parkForRetry(await this.#broker?.retryChannel(), this.options, delivery, settlement);
      // A copy amqplib cannot encode: quarantined, and its row unparked with it (settle.ts uncopyable).
      const quarantined =
        parked instanceof PublishError && (await this.#settler.uncopyable(delivery, settlement, parked, true));
      if (quarantined && quarantined.action === 'ack') this.#report.drained(quarantined);
      else this.#report.retried();
      if (parked === 'parked' && eventId !== null) handedBack.push(eventId);
    }
    return handedBack;
  }

  async #closeSession(): Promise<void> {
    this.#sessionEnded = undefined;
    this.#registration.pause();
    // Stop new deliveries first, then let the ones already taken commit and ack.
    if (this.#subscribed) await this.#broker?.cancel();
    this.#subscribed = false;
    // Deliveries not yet started go back to the queue when the channel closes.
    this.#pump.discard();
    await this.#pump.settled();
    const broker = this.#broker;
    this.#broker = undefined;
    await broker?.close();
  }
}

/** Creates and starts a consumer; `await consumer.ready()` to know the subscription is live. */
export function startConsumer<M extends object = UntypedEvents>(options: ConsumerOptions<M>): Consumer<M> {
  return new Consumer<M>(options).start();
}
