import client from 'prom-client';
import { pingDatabase } from '../db/pool.js';
import { schemaRef } from '../runtime/identifier.js';
import type { Tenants } from '../tenants/index.js';
import { registerOutboxGauges, registerReorderGauges } from './database-gauges.js';
import { registerBrokerConnected } from './health.js';
import {
  instrumentConsumer,
  metricsEndpointOptions,
  serveUntilClosed,
  type MetricsEndpoint,
  type ServedMetrics,
} from './metrics.js';
import { instrumentRelay } from './relay.js';

/**
 * The relay's and consumer's instruments and the database gauges of every tenant, under the names
 * a single relay or consumer serves, each series labelled with its tenant: `schema` for schemas on
 * one server, `database` for a database per tenant (the label names what differs). One registry
 * per tenant with that default label, merged at scrape time (prom-client's aggregate keeps series
 * whose labels differ apart). /readyz answers 200 while every relay has its confirm channel and
 * every pool answers; /healthz 503 once a permanent misconfiguration stopped a relay or a consumer.
 */
export function serveTenantMetrics(tenants: Tenants, input: MetricsEndpoint): ServedMetrics {
  const endpoint = metricsEndpointOptions.parse(input);
  const label = tenants.options.layout === 'schemas' ? 'schema' : 'database';
  const parts = tenants.tenants.map((tenant) => tenantRegistry(tenants, tenant, label, endpoint.gapAfterMs));
  const registry = new MergedRegistry(endpoint.registry, parts);
  const relays = tenants.tenants.map((tenant) => tenants.relay(tenant));
  const consumers = tenants.tenants.flatMap((tenant) => tenants.consumer(tenant) ?? []);
  const pools = [...new Set(tenants.tenants.map((tenant) => tenants.poolOf(tenant)))];
  return serveUntilClosed(registry, endpoint, {
    ready: async () =>
      relays.every((relay) => relay.connected) &&
      (await Promise.all(pools.map((pool) => pingDatabase(pool)))).every(Boolean),
    live: () => [...relays, ...consumers].every((component) => component.failure === undefined),
  });
}

function tenantRegistry(tenants: Tenants, tenant: string, label: string, gapAfterMs: number): client.Registry {
  const registry = new client.Registry();
  registry.setDefaultLabels({ [label]: tenant });
  const relay = tenants.relay(tenant);
  const pool = tenants.poolOf(tenant);
  const schema = schemaRef(tenants.schemaOf(tenant));
  instrumentRelay(relay, registry);
  registerOutboxGauges(registry, pool, schema);
  registerBrokerConnected(registry, () => relay.connected);
  const consumer = tenants.consumer(tenant);
  if (consumer) {
    instrumentConsumer(consumer, registry);
    registerReorderGauges(registry, pool, schema, gapAfterMs);
  }
  return registry;
}

/** Serves the caller's registry (if given) and the tenants' ones as one exposition. */
class MergedRegistry extends client.Registry {
  readonly #parts: client.Registry[];

  constructor(own: client.Registry | undefined, parts: client.Registry[]) {
    super();
    this.#parts = own ? [own, ...parts] : parts;
  }

  override async metrics(): Promise<string> {
    const all = await Promise.all(this.#parts.map((part) => part.getMetricsAsJSON()));
    return client.AggregatorRegistry.aggregate(all).metrics();
  }
}
