import pg from 'pg';
import type { Executor } from '../db/executor.js';
import { withoutPreparedStatements } from '../db/statement.js';
import { assertDatabaseUrl, newPool } from '../db/pool.js';
import { ConfigError } from '../runtime/errors.js';
import type { NewEventOf, UntypedEvents } from '../envelope/events.js';
import { Consumer, type ConsumerOptions } from '../inbox/index.js';
import { readStatus, type ConvergeStatus } from '../ops/index.js';
import { appendManyToOutbox, appendToOutbox, type AppendedEvent, type OutboxOptions } from '../outbox/append.js';
import { reconcile, type ReconcileOptions, type ReconcileReport } from '../reconcile/index.js';
import { CdcRelay, Relay, type CdcRelayOptions, type RelayOptions } from '../relay/index.js';
import { migrate, type MigrateResult } from '../schema/migrate.js';
import {
  convergeOptions,
  refuseShared,
  type ConvergeOptions,
  type ResolvedConvergeOptions,
  type SharedOption,
} from './options.js';

/** A component's own options: what createConverge set is not among them. */
export type RelayOwnOptions = Omit<RelayOptions, SharedOption>;
export type CdcRelayOwnOptions = Omit<CdcRelayOptions, SharedOption>;
export type ConsumerOwnOptions<M extends object = UntypedEvents> = Omit<ConsumerOptions<M>, SharedOption>;
export type ReconcileOwnOptions = Omit<ReconcileOptions, 'schema'>;

interface Stoppable {
  stop(): Promise<void>;
}

/**
 * One converge installation: a database schema, a broker, an event catalog and a logger, given
 * once. Every method works in that schema, and what it starts is stopped by close(). The free
 * functions (appendToOutbox, startRelay, startConsumer, ...) stay for those who want to pass
 * everything themselves.
 */
export class Converge<M extends object = UntypedEvents, I extends object = M> {
  readonly options: ResolvedConvergeOptions;
  /** The pool migrate, status and reconcile use: the one given, or one opened from connectionString. */
  readonly pool: pg.Pool;
  readonly #ownsPool: boolean;
  readonly #outbox: OutboxOptions<I>;
  readonly #started = new Set<Stoppable>();

  constructor(input: ConvergeOptions<M, I>) {
    this.options = convergeOptions.parse(input);
    this.#ownsPool = this.options.pool === undefined;
    if (this.options.connectionString !== undefined) assertDatabaseUrl(this.options.connectionString);
    this.pool = this.options.pool ?? newPool({ connectionString: this.options.connectionString });
    if (this.#ownsPool) this.pool.on('error', () => undefined);
    if (this.options.poolMode === 'transaction') withoutPreparedStatements(this.pool);
    this.#outbox = { schema: this.options.schema, ...(input.events ? { events: input.events } : {}) };
  }

  /** Creates or upgrades converge's tables in the schema (idempotent; one migration at a time). */
  migrate(): Promise<MigrateResult> {
    return migrate(this.pool, { schema: this.options.schema });
  }

  /** Writes one event on the caller's transaction, checked against the catalog. */
  append(tx: Executor, event: NewEventOf<I>): Promise<AppendedEvent> {
    return appendToOutbox<I>(tx, event, this.#outbox);
  }

  /** Writes several events on the caller's transaction in one statement. */
  appendMany(tx: Executor, events: readonly NewEventOf<I>[]): Promise<AppendedEvent[]> {
    return appendManyToOutbox<I>(tx, events, this.#outbox);
  }

  /** Starts a polling relay from the outbox of this schema to the broker. */
  startRelay(options: RelayOwnOptions = {}): Relay {
    refuseShared('startRelay', options);
    return this.#track(new Relay({ ...options, ...this.#link(), poolMode: this.options.poolMode }).start());
  }

  /** Starts a relay fed by a logical replication slot instead of polling (docs/relay.md). */
  startCdcRelay(options: CdcRelayOwnOptions): CdcRelay {
    refuseShared('startCdcRelay', options);
    if (this.options.poolMode === 'transaction')
      throw new ConfigError([
        {
          path: 'poolMode',
          message:
            'the CDC relay streams from a replication slot, which a transaction-mode pooler cannot carry: start it with startCdcRelay on a direct connectionString',
        },
      ]);
    return this.#track(new CdcRelay({ ...options, ...this.#link() }).start());
  }

  /** Starts a consumer whose handlers get a context bound to this schema (ctx.applyIncrement, ...). */
  startConsumer(options: ConsumerOwnOptions<M>): Consumer<M> {
    refuseShared('startConsumer', options);
    const events = this.options.events ? { events: this.options.events } : {};
    const link = { ...this.#link(), poolMode: this.options.poolMode };
    return this.#track(new Consumer<M>({ ...options, ...events, ...link } as ConsumerOptions<M>).start());
  }

  /** Compares a projection with its source in this schema (and repairs, if asked). */
  reconcile(options: ReconcileOwnOptions): Promise<ReconcileReport> {
    refuseShared('reconcile', options, ['schema']);
    return reconcile(this.pool, { ...options, schema: this.options.schema });
  }

  /** The outbox backlog, the oldest unpublished event and the quarantine of this schema. */
  status(): Promise<ConvergeStatus> {
    return readStatus(this.pool, { schema: this.options.schema });
  }

  /** Stops every relay and consumer this started (each drains what it has in flight), then its own pool. */
  async close(): Promise<void> {
    const started = [...this.#started];
    this.#started.clear();
    await Promise.all(started.map((component) => component.stop()));
    if (this.#ownsPool) await this.pool.end();
  }

  #track<T extends Stoppable>(component: T): T {
    this.#started.add(component);
    return component;
  }

  /** Where a started component connects: the pool given, or its own from the same URL (sized for it). */
  #link() {
    const { pool, connectionString, amqpUrl, transport, amqpSocketOptions, exchange, schema, logger } = this.options;
    return {
      ...(this.#ownsPool ? { connectionString } : { pool }),
      ...(transport ? { transport } : amqpUrl ? { amqpUrl } : {}),
      ...(amqpSocketOptions ? { amqpSocketOptions } : {}),
      exchange,
      schema,
      logger,
    };
  }
}

/**
 * The front door: `createConverge({ connectionString, amqpUrl, events })`, then migrate, append,
 * startRelay, startConsumer, reconcile, status and close on what it returns.
 */
export function createConverge<M extends object = UntypedEvents, I extends object = M>(
  options: ConvergeOptions<M, I>,
): Converge<M, I> {
  return new Converge<M, I>(options);
}
