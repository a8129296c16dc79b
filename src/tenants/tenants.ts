import type pg from 'pg';
import { leasePool, type PoolLease } from '../db/pool.js';
import { Consumer } from '../inbox/index.js';
import { readStatus, type ConvergeStatus } from '../ops/index.js';
import { OutboxListener, Relay } from '../relay/index.js';
import { transportFor } from '../transport/rabbitmq.js';
import { shareConnection, type SharedConnectionTransport } from '../transport/shared-connection.js';
import {
  refuseTenantShared,
  tenantsOptions,
  underField,
  type ResolvedTenantsOptions,
  type TenantsOptions,
} from './options.js';

/** What one tenant runs now, from its components' own state. */
export interface TenantState {
  schema: string;
  relay: { connected: boolean; databaseReachable: boolean; brokerBlocked: boolean; failure?: string };
  consumer?: { subscribed: boolean; failure?: string };
}

/** The exchange of one tenant: its events never reach another tenant's queues. */
export function tenantExchange(prefix: string, schema: string): string {
  return `${prefix}.${schema}`;
}

/**
 * The relays (and consumers) of several tenant schemas on one PostgreSQL server, in one process:
 * one broker connection for all of them (each keeps its own channels, so confirms stay per relay),
 * one bounded pool (their SQL names its schema) and one LISTEN connection. Relays take turns on
 * the pool in the order they asked for a connection (pg.Pool's queue is first come, first served),
 * so a tenant with a backlog of thousands claims one batch per turn while the others get theirs.
 */
export class Tenants {
  readonly options: ResolvedTenantsOptions;
  readonly schemas: readonly string[];
  /** The shared broker connection: `connectionsOpened` counts what the broker has seen of this process. */
  readonly transport: SharedConnectionTransport;
  readonly #lease: PoolLease;
  readonly #relays = new Map<string, Relay>();
  readonly #consumers = new Map<string, Consumer>();
  readonly #listener: OutboxListener | undefined;
  #stopping: Promise<void> | undefined;

  /** Throws ConfigError naming the field (relay.batchSize, consumer.queue, ...) before anything connects. */
  constructor(input: TenantsOptions) {
    this.options = tenantsOptions.parse(input);
    const o = this.options;
    refuseTenantShared('relay', o.relay);
    this.schemas = o.schemas;
    this.transport = shareConnection(transportFor(o), `converge-tenants ${o.name}`);
    this.#lease = leasePool(o.pool, {
      connectionString: o.connectionString,
      poolMode: o.poolMode,
      max: o.maxConnections,
      applicationName: 'converge-tenants',
      logger: o.logger,
    });
    for (const schema of o.schemas) {
      this.#relays.set(schema, this.#relay(schema));
      const consumer = this.#consumer(schema);
      if (consumer) this.#consumers.set(schema, consumer);
    }
    if (o.listen && o.poolMode === 'session')
      this.#listener = new OutboxListener(this.pool, (schema) => this.#relays.get(schema)?.wake(), o.logger);
  }

  /** The one pool every tenant's relay and consumer runs on. */
  get pool(): pg.Pool {
    return this.#lease.pool;
  }

  /** Starts consumers first (so the first events find their queues bound), then relays. */
  start(): this {
    for (const consumer of this.#consumers.values()) consumer.start();
    for (const relay of this.#relays.values()) {
      // An idle relay keeps the listener connected: it reconnects after a loss on the next empty claim.
      relay.on('idle', () => void this.#listener?.ensure());
      relay.start();
    }
    void this.#listener?.ensure();
    return this;
  }

  relay(schema: string): Relay {
    const relay = this.#relays.get(schema);
    if (!relay) throw new RangeError(`no tenant schema "${schema}"`);
    return relay;
  }

  consumer(schema: string): Consumer | undefined {
    return this.#consumers.get(schema);
  }

  /** Each tenant's relay and consumer, as they report themselves (no database read). */
  state(): TenantState[] {
    return this.schemas.map((schema) => {
      const relay = this.relay(schema);
      const consumer = this.consumer(schema);
      return {
        schema,
        relay: {
          connected: relay.connected,
          databaseReachable: relay.databaseReachable,
          brokerBlocked: relay.brokerBlocked,
          ...(relay.failure ? { failure: relay.failure.message } : {}),
        },
        ...(consumer
          ? {
              consumer: {
                subscribed: consumer.subscribed,
                ...(consumer.failure ? { failure: consumer.failure.message } : {}),
              },
            }
          : {}),
      };
    });
  }

  /** Every relay and consumer ready (see Relay.ready); rejects with the first failure. */
  async ready(options: { timeoutMs?: number } = {}): Promise<void> {
    const components = [...this.#consumers.values(), ...this.#relays.values()];
    await Promise.all(components.map((component) => component.ready(options)));
  }

  /** The outbox backlog and quarantine of each schema, read one schema after another (one connection). */
  async status(): Promise<Record<string, ConvergeStatus>> {
    const statuses: Record<string, ConvergeStatus> = {};
    for (const schema of this.schemas) statuses[schema] = await readStatus(this.pool, { schema });
    return statuses;
  }

  /** Relays first (their batches in flight get confirmed and marked), then consumers, the listener, the broker connection and the pool. */
  stop(): Promise<void> {
    this.#stopping ??= this.#stop();
    return this.#stopping;
  }

  async #stop(): Promise<void> {
    await Promise.all([...this.#relays.values()].map((relay) => relay.stop()));
    await Promise.all([...this.#consumers.values()].map((consumer) => consumer.stop()));
    await this.#listener?.close();
    await this.transport.closed();
    await this.#lease.release();
  }

  #relay(schema: string): Relay {
    const o = this.options;
    try {
      return new Relay({
        pollIntervalMs: 1_000,
        relayId: `${o.name}/${schema}`,
        ...o.relay,
        ...this.#shared(schema),
        listen: false,
      });
    } catch (err) {
      throw underField('relay', err);
    }
  }

  #consumer(schema: string): Consumer | undefined {
    const own = this.options.consumer?.(schema);
    if (own === undefined) return undefined;
    refuseTenantShared('consumer', own);
    try {
      return new Consumer({ ...own, ...this.#shared(schema) });
    } catch (err) {
      throw underField('consumer', err);
    }
  }

  /** What every component of one tenant gets: the shared pool and broker connection, its schema and exchange. */
  #shared(schema: string) {
    const o = this.options;
    return {
      pool: this.pool,
      poolMode: o.poolMode,
      transport: this.transport,
      schema,
      exchange: tenantExchange(o.exchange, schema),
      logger: o.logger,
    };
  }
}

/**
 * Starts a relay per tenant schema (and a consumer per schema when `consumer` gives its options)
 * on one broker connection and one bounded pool; `stop()` on what it returns stops them all.
 */
export function startTenants(options: TenantsOptions): Tenants {
  return new Tenants(options).start();
}
