import type client from 'prom-client';
import { scrapedGauge } from './instruments.js';

/**
 * Database reads behind the gauges of one registry. A scrape while the database is down must
 * still answer (the process counters are still true, and Prometheus' own `up` would otherwise
 * say the process is gone): each read fails soft, its gauges report nothing, and
 * `converge_database_up` reports 0 for that scrape.
 */
const reads = new WeakMap<client.Registry, (() => Promise<unknown>)[]>();

/**
 * One query per scrape for all gauges built on it (the first collect() of a scrape starts it,
 * the others share it), undefined when the database could not answer.
 */
export function databaseRead<T>(registry: client.Registry, query: () => Promise<T>): () => Promise<T | undefined> {
  let pending: Promise<T> | undefined;
  const shared = () => (pending ??= query().finally(() => setImmediate(() => (pending = undefined))));
  let list = reads.get(registry);
  if (!list) {
    list = [];
    reads.set(registry, list);
    registerDatabaseUp(registry, list);
  }
  list.push(shared);
  return () => shared().catch(() => undefined);
}

function registerDatabaseUp(registry: client.Registry, list: (() => Promise<unknown>)[]): void {
  scrapedGauge(
    registry,
    'converge_database_up',
    "1 when this scrape's database reads succeeded, 0 when the database could not be read (its gauges are then absent).",
    async () => {
      const results = await Promise.allSettled(list.map((read) => read()));
      return results.every((r) => r.status === 'fulfilled') ? 1 : 0;
    },
  );
}

/** A connected gauge for a relay's confirm channel or a consumer's subscription. */
export function registerBrokerConnected(registry: client.Registry, connected: () => boolean): void {
  scrapedGauge(
    registry,
    'converge_broker_connected',
    '1 while the relay has an open confirm channel (consumer: an active subscription) to RabbitMQ.',
    () => (connected() ? 1 : 0),
  );
}
