import { EventEmitter } from 'node:events';
import type pg from 'pg';
import { leasePool, poolTarget } from '../../db/pool.js';
import { findSuitableHost } from '../../db/failover-client.js';
import { parseHostList, type HostList } from '../../runtime/host-list.js';
import { schemaRef } from '../../runtime/identifier.js';
import { Service } from '../../runtime/service.js';
import { SessionLink } from '../broker-link.js';
import { checkSchema } from '../../schema/migrate.js';
import { PartitionKeeper } from '../../schema/partition-keeper.js';
import { resolveCdcRelayOptions, type CdcRelayOptions, type ResolvedCdcRelayOptions } from './options.js';
import { CdcSession, type SessionContext } from './session.js';
import { createCdcSlot, requireLogicalWalLevel, showCdcSlot } from './slot-sql.js';
import { cdcSql } from '../sql.js';
import type { CdcRelayEvents, CdcRelayState } from './types.js';

/**
 * Moves committed outbox inserts to RabbitMQ by reading a logical replication slot instead of
 * polling: PostgreSQL hands over each committed transaction's rows in commit order. Each event is
 * published with confirms and `mandatory`; the slot is advanced only to a commit LSN up to which
 * every event is confirmed and marked published. A return, nack or lost confirm stops the stream
 * at that event and restarts it from the slot after a backoff, so the event is retried in order
 * and nothing after it is skipped. Duplicates after a restart, never losses.
 *
 * PostgreSQL lets one connection use a slot: a second relay on the same slot waits as a standby
 * and takes over from the acknowledged LSN when the first one goes.
 */
export class CdcRelay extends EventEmitter<CdcRelayEvents> {
  readonly options: ResolvedCdcRelayOptions;
  readonly #pool: pg.Pool;
  /** The stream runs for hours without a loop turn, so partitions ahead are checked on a timer of their own. */
  readonly #partitions: PartitionKeeper;
  #partitionTimer: NodeJS.Timeout | undefined;
  readonly #releasePool: () => Promise<void>;
  readonly #context: SessionContext;
  /** The connection string's host list, if it names several hosts (only with failoverSlot). */
  readonly #hosts: HostList | undefined;
  #state: CdcRelayState = 'starting';
  #session: CdcSession | undefined;
  #setUp = false;
  readonly #service: Service;

  /** Throws ConfigError for options that can never work. */
  constructor(options: CdcRelayOptions) {
    super();
    this.options = resolveCdcRelayOptions(options);
    const lease = leasePool(this.options.pool, {
      connectionString: this.options.connectionString,
      max: 2,
      applicationName: 'converge-cdc-relay',
      logger: this.options.logger,
    });
    this.#pool = lease.pool;
    this.#releasePool = () => lease.release();
    const databaseTarget = poolTarget(lease.pool);
    this.#service = new Service({
      component: `CDC relay ${this.options.relayId}`,
      what: 'CDC relay session',
      logger: this.options.logger,
      databaseTarget: () => databaseTarget,
      reconnectBackoff: this.options.reconnectBackoff,
      handleSignals: this.options.handleSignals,
      emitter: this,
      fields: { relayId: this.options.relayId, slot: this.options.slot },
      interrupt: () => this.#session?.stop(),
      close: async () => {
        clearInterval(this.#partitionTimer);
        await this.#partitions.settled();
        await this.#releasePool();
      },
    });
    this.#partitions = new PartitionKeeper(lease.pool, schemaRef(this.options.schema), this.options.logger);
    this.#hosts = this.options.connectionString ? parseHostList(this.options.connectionString) : undefined;
    const base: pg.ClientConfig = this.options.connectionString
      ? { connectionString: this.options.connectionString }
      : { ...(lease.pool.options as pg.ClientConfig) };
    this.#context = {
      options: this.options,
      pool: this.#pool,
      sql: cdcSql(schemaRef(this.options.schema)),
      events: this,
      client: { ...base, application_name: `converge-cdc ${this.options.relayId}`.slice(0, 63) },
      broker: new SessionLink(this.options),
      uncounted: new Map(),
    };
  }

  /** Starts streaming (or waiting as a standby) in the background and returns at once. */
  start(): this {
    this.#partitionTimer = setInterval(() => this.#partitions.tick(), 1_000).unref();
    this.#service.start((succeeded) => this.#step(succeeded), {
      afterLoop: async () => void (this.#state = 'stopped'),
    });
    return this;
  }

  /**
   * Resolves once the relay streams from its slot or waits as a standby (its database, schema and
   * slot are usable). Rejects with the typed error of a permanent misconfiguration
   * (SchemaNotMigratedError, WalLevelNotLogicalError, ConnectionConfigError), after which the
   * relay has stopped; with `timeoutMs`, rejects with ReadyTimeoutError naming the last failure
   * while it keeps retrying.
   */
  ready(options: { timeoutMs?: number } = {}): Promise<void> {
    return this.#service.readiness.wait(options);
  }

  /** The permanent misconfiguration that stopped the relay, if one did. */
  get failure(): Error | undefined {
    return this.#service.failure;
  }

  get state(): CdcRelayState {
    return this.#state;
  }

  /** The pool it marks with, for read-only companions such as the slot and outbox gauges. */
  get pool(): pg.Pool {
    return this.#pool;
  }

  /** Age in ms of the oldest event received from the slot and not yet confirmed by the broker (0 if none). */
  get oldestUnconfirmedAgeMs(): number {
    return this.#session?.progress.oldestUnconfirmedAgeMs(performance.now()) ?? 0;
  }

  /** Lets the events in flight get their confirms, marks and acknowledges them, then closes everything. */
  stop(): Promise<void> {
    return this.#service.stop();
  }

  /** One session on the slot: streaming until it ends, then the wait its end asks for. */
  async #step(succeeded: () => void): Promise<void> {
    try {
      await this.#setUpOnce();
      await this.#streamFromWritableHost();
      const session = new CdcSession(this.#context);
      this.#session = session;
      if (this.#service.stopping) session.stop();
      const end = await session.run(() => {
        succeeded();
        this.#setState('active');
      });
      if (end.kind === 'standby') {
        if (this.#state !== 'standby') await this.#enterStandby();
        await this.#service.idle.backoff(this.options.standbyRetryMs);
      } else if (end.kind === 'retry') {
        await this.#service.idle.backoff(end.delayMs);
      }
    } finally {
      this.#session = undefined;
    }
  }

  /**
   * With a host list, each session streams from the host that accepts writes now: after a failover
   * that is the promoted standby, where the failover slot was kept. Throws NoSuitableHostError
   * (an outage: the relay backs off) while none does.
   */
  async #streamFromWritableHost(): Promise<void> {
    if (!this.#hosts) return;
    const host = await findSuitableHost(this.#hosts, { connectionTimeoutMillis: 5_000 });
    this.#context.client = { ...this.#context.client, connectionString: this.#hosts.urlFor(host) };
  }

  async #setUpOnce(): Promise<void> {
    if (this.#setUp) return;
    await checkSchema(this.#pool, this.options.schema);
    await requireLogicalWalLevel(this.#pool);
    if (this.options.createSlot)
      await createCdcSlot(this.#pool, {
        schema: this.options.schema,
        slot: this.options.slot,
        publication: this.options.publication,
        failover: this.options.failoverSlot,
      });
    this.#setUp = true;
  }

  async #enterStandby(): Promise<void> {
    const holder = await showCdcSlot(this.#pool, this.options.slot).catch(() => undefined);
    this.#setState('standby', holder?.activePid ?? null);
  }

  #setState(state: 'active' | 'standby', holderPid: number | null = null): void {
    this.#state = state;
    if (!this.#service.readiness.settled) this.#service.readiness.resolve();
    const fields = { relayId: this.options.relayId, slot: this.options.slot };
    if (state === 'active') {
      this.options.logger.info(fields, 'CDC relay streaming from its slot');
      this.emit('active');
    } else {
      this.options.logger.info({ ...fields, holderPid }, 'slot held by another relay: waiting as standby');
      this.emit('standby', holderPid);
    }
  }
}

/** Creates and starts a CDC relay. */
export function startCdcRelay(options: CdcRelayOptions): CdcRelay {
  return new CdcRelay(options).start();
}
