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
  type TenantSite,
  type TenantsOptions,
} from './options.js';

/** What one tenant runs now, from its components' own state. */
export interface TenantState {
  /** The tenant's name: its schema, or its key in `databases`. */
  tenant: string;
  schema: string;
  relay: { connected: boolean; databaseReachable: boolean; brokerBlocked: boolean; failure?: string };
  consumer?: { subscribed: boolean; failure?: string };
}

/** The exchange of one tenant: its events never reach another tenant's queues. */
export function tenantExchange(prefix: string, tenant: string): string {
  return `${prefix}.${tenant}`;
}

/** One database of the process: its pool, its LISTEN connection, and the relays of its schemas. */
interface Store {
  lease: PoolLease;
  relays: Map<string, Relay>;
  listener?: OutboxListener;
}

/**
 * The relays (and consumers) of several tenants in one process, a tenant being a schema on one
 * PostgreSQL server or a database of its own: one broker connection for all of them (each keeps its
 * own channels, so confirms stay per relay), one bounded pool and one LISTEN connection per
 * database (their SQL names its schema). Relays take turns on a pool in the order they asked for a
 * connection (pg.Pool's queue is first come, first served), so a tenant with a backlog of thousands
 * claims one batch per turn while the others get theirs.
 */
export class Tenants {
  readonly options: ResolvedTenantsOptions;
  /** The tenants' names: the schemas, or the keys of `databases`. */
  readonly tenants: readonly string[];
  /** The shared broker connection: `connectionsOpened` counts what the broker has seen of this process. */
  readonly transport: SharedConnectionTransport;
  readonly #stores: Store[];
  readonly #sites = new Map<string, TenantSite>();
  readonly #relays = new Map<string, Relay>();
  readonly #consumers = new Map<string, Consumer>();
  #stopping: Promise<void> | undefined;

  /** Throws ConfigError naming the field (relay.batchSize, consumer.queue, ...) before anything connects. */
  constructor(input: TenantsOptions) {
    this.options = tenantsOptions.parse(input);
    const o = this.options;
    refuseTenantShared('relay', o.relay);
    this.tenants = o.sites.map((site) => site.tenant);
    this.transport = shareConnection(transportFor(o), `converge-tenants ${o.name}`);
    this.#stores = o.pools.map((database) => ({
      lease: leasePool(database.pool, {
        connectionString: database.connectionString,
        poolMode: o.poolMode,
        max: database.max,
        applicationName: 'converge-tenants',
        logger: o.logger,
      }),
      relays: new Map(),
    }));
    for (const site of o.sites) {
      this.#sites.set(site.tenant, site);
      const relay = this.#relay(site);
      this.#relays.set(site.tenant, relay);
      this.#stores[site.database]!.relays.set(site.schema, relay);
      const consumer = this.#consumer(site);
      if (consumer) this.#consumers.set(site.tenant, consumer);
    }
    if (o.listen && o.poolMode === 'session')
      for (const store of this.#stores)
        store.listener = new OutboxListener(store.lease.pool, (schema) => store.relays.get(schema)?.wake(), o.logger);
  }

  /** The pool a tenant's relay and consumer run on: shared by every tenant of its database. */
  poolOf(tenant: string): pg.Pool {
    return this.#stores[this.#site(tenant).database]!.lease.pool;
  }

  /** The schema holding a tenant's converge tables. */
  schemaOf(tenant: string): string {
    return this.#site(tenant).schema;
  }

  /** Starts consumers first (so the first events find their queues bound), then relays. */
  start(): this {
    for (const consumer of this.#consumers.values()) consumer.start();
    for (const store of this.#stores) {
      for (const relay of store.relays.values()) {
        // An idle relay keeps the listener connected: it reconnects after a loss on the next empty claim.
        relay.on('idle', () => void store.listener?.ensure());
        relay.start();
      }
      void store.listener?.ensure();
    }
    return this;
  }

  relay(tenant: string): Relay {
    this.#site(tenant);
    return this.#relays.get(tenant)!;
  }

  consumer(tenant: string): Consumer | undefined {
    this.#site(tenant);
    return this.#consumers.get(tenant);
  }

  /** Each tenant's relay and consumer, as they report themselves (no database read). */
  state(): TenantState[] {
    return this.tenants.map((tenant) => {
      const relay = this.relay(tenant);
      const consumer = this.consumer(tenant);
      return {
        tenant,
        schema: this.schemaOf(tenant),
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

  /** The outbox backlog and quarantine of each tenant, read one tenant after another (one connection at a time). */
  async status(): Promise<Record<string, ConvergeStatus>> {
    const statuses: Record<string, ConvergeStatus> = {};
    for (const tenant of this.tenants)
      statuses[tenant] = await readStatus(this.poolOf(tenant), { schema: this.schemaOf(tenant) });
    return statuses;
  }

  /** Relays first (their batches in flight get confirmed and marked), then consumers, the listeners, the broker connection and the pools. */
  stop(): Promise<void> {
    this.#stopping ??= this.#stop();
    return this.#stopping;
  }

  async #stop(): Promise<void> {
    await Promise.all([...this.#relays.values()].map((relay) => relay.stop()));
    await Promise.all([...this.#consumers.values()].map((consumer) => consumer.stop()));
    await Promise.all(this.#stores.flatMap((store) => (store.listener ? [store.listener.close()] : [])));
    await this.transport.closed();
    await Promise.all(this.#stores.map((store) => store.lease.release()));
  }

  #site(tenant: string): TenantSite {
    const site = this.#sites.get(tenant);
    if (!site) throw new RangeError(`no tenant "${tenant}"`);
    return site;
  }

  #relay(site: TenantSite): Relay {
    const o = this.options;
    try {
      return new Relay({
        pollIntervalMs: 1_000,
        relayId: `${o.name}/${site.tenant}`,
        ...o.relay,
        ...this.#shared(site),
        listen: false,
      });
    } catch (err) {
      throw underField('relay', err);
    }
  }

  #consumer(site: TenantSite): Consumer | undefined {
    const own = this.options.consumer?.(site.tenant);
    if (own === undefined) return undefined;
    refuseTenantShared('consumer', own);
    try {
      return new Consumer({ ...own, ...this.#shared(site) });
    } catch (err) {
      throw underField('consumer', err);
    }
  }

  /** What every component of one tenant gets: its database's pool, the broker connection, its schema and exchange. */
  #shared(site: TenantSite) {
    const o = this.options;
    return {
      pool: this.#stores[site.database]!.lease.pool,
      poolMode: o.poolMode,
      transport: this.transport,
      schema: site.schema,
      exchange: tenantExchange(o.exchange, site.tenant),
      logger: o.logger,
    };
  }
}

/**
 * Starts a relay per tenant (and a consumer per tenant when `consumer` gives its options) on one
 * broker connection and one bounded pool per database; `stop()` on what it returns stops them all.
 */
export function startTenants(options: TenantsOptions): Tenants {
  return new Tenants(options).start();
}
