import client from 'prom-client';
import type { CdcRelay } from '../relay/index.js';
import { showCdcSlot } from '../relay/index.js';
import { schemaRef } from '../runtime/identifier.js';
import { databaseRead, registerBrokerConnected } from './health.js';
import { registerOutboxGauges } from './database-gauges.js';
import {
  instrumentPublishing,
  metricsEndpointOptions,
  serveUntilClosed,
  type MetricsEndpoint,
  type ServedMetrics,
} from './metrics.js';

/**
 * A CDC relay's instruments. Published, confirm latency and publish failures keep the polling
 * relay's names (they mean the same); the slot adds what only it has: the WAL it retains (the disk
 * risk of a stuck slot, the first thing to alert on), the age of the oldest event received and not
 * yet confirmed, and whether this relay streams or waits as a standby.
 */
export function instrumentCdcRelay(relay: CdcRelay, registry: client.Registry): void {
  instrumentPublishing(relay, registry);
  const readSlot = databaseRead(registry, () => showCdcSlot(relay.pool, relay.options.slot));
  new client.Gauge({
    name: 'converge_cdc_slot_retained_wal_bytes',
    help: "WAL PostgreSQL keeps for the CDC relay's slot (pg_current_wal_lsn() - restart_lsn); grows while the slot is stuck or no relay runs. NaN when unreadable.",
    registers: [registry],
    async collect() {
      const slot = await readSlot();
      this.set(slot ? slot.retainedWalBytes : NaN);
    },
  });
  new client.Gauge({
    name: 'converge_cdc_oldest_unconfirmed_seconds',
    help: 'Age of the oldest event received from the slot and not yet confirmed by the broker (0 when none).',
    registers: [registry],
    collect() {
      this.set(relay.oldestUnconfirmedAgeMs / 1000);
    },
  });
  new client.Gauge({
    name: 'converge_cdc_relay_active',
    help: '1 while this relay holds the slot and streams, 0 while it waits as a standby or is not running.',
    registers: [registry],
    collect() {
      this.set(relay.state === 'active' ? 1 : 0);
    },
  });
}

/**
 * A CDC relay's instruments and the outbox gauges, served until `close()`. /readyz answers 200
 * while the relay streams or waits as a standby (both are where it should be); /healthz 503 once stopped.
 */
export function serveCdcRelayMetrics(relay: CdcRelay, input: MetricsEndpoint): ServedMetrics {
  const endpoint = metricsEndpointOptions.parse(input);
  const registry = endpoint.registry ?? new client.Registry();
  instrumentCdcRelay(relay, registry);
  registerOutboxGauges(registry, relay.pool, schemaRef(relay.options.schema));
  registerBrokerConnected(registry, () => relay.state === 'active');
  return serveUntilClosed(registry, endpoint, {
    ready: () => relay.state === 'active' || relay.state === 'standby',
    live: () => relay.state !== 'stopped',
  });
}
