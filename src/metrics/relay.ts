import client from 'prom-client';
import { CdcRelay, showCdcSlot, type PublishEvents, type Relay } from '../relay/index.js';
import { schemaRef } from '../runtime/identifier.js';
import { registerOutboxGauges } from './database-gauges.js';
import { databaseRead, registerBrokerConnected } from './health.js';
import { counter, eventGauge, histogram, scrapedGauge } from './instruments.js';
import { metricsEndpointOptions, serveUntilClosed, type MetricsEndpoint, type ServedMetrics } from './metrics.js';

/** Either relay: the polling one (claims) or the CDC one (a replication slot). */
export type AnyRelay = Relay | CdcRelay;

/** Seconds; from a millisecond confirm to ten seconds. */
const CONFIRM_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/**
 * Counts what a relay does, from its events: published, confirm latency and publish failures by
 * reason under the same names for both relays, so a dashboard or alert reads either; then what
 * only its kind has (the polling relay's blocked connection and lock, the CDC relay's slot).
 */
export function instrumentRelay(relay: AnyRelay, registry: client.Registry): void {
  instrumentPublishing(relay, registry);
  if (relay instanceof CdcRelay) registerSlotGauges(relay, registry);
  else registerPollingInstruments(relay, registry);
}

/**
 * A relay's instruments and the outbox gauges of its database, served until `close()`. /readyz
 * answers 200 while the polling relay has an open confirm channel and its last claim reached
 * PostgreSQL, or while the CDC relay streams or waits as a standby (both are where it should be);
 * /healthz 503 once a permanent misconfiguration stopped it. The relay itself knows nothing of
 * this: everything is read from its typed events and its public state.
 */
export function serveRelayMetrics(relay: AnyRelay, input: MetricsEndpoint): ServedMetrics {
  const endpoint = metricsEndpointOptions.parse(input);
  const registry = endpoint.registry ?? new client.Registry();
  instrumentRelay(relay, registry);
  registerOutboxGauges(registry, relay.pool, schemaRef(relay.options.schema));
  const { connected, ready, live } = relay instanceof CdcRelay ? cdcProbes(relay) : pollingProbes(relay);
  registerBrokerConnected(registry, connected);
  return serveUntilClosed(registry, endpoint, { ready, live });
}

interface Probes {
  connected: () => boolean;
  ready: () => boolean;
  live: () => boolean;
}

function pollingProbes(relay: Relay): Probes {
  return {
    connected: () => relay.connected,
    ready: () => relay.connected && relay.databaseReachable,
    live: () => relay.failure === undefined,
  };
}

function cdcProbes(relay: CdcRelay): Probes {
  return {
    connected: () => relay.state === 'active',
    ready: () => relay.state === 'active' || relay.state === 'standby',
    live: () => relay.state !== 'stopped',
  };
}

/** What the publishing instruments listen to: the events both relays emit alike. */
interface PublishingRelay {
  on(event: 'published', listener: (...args: PublishEvents['published']) => void): unknown;
  on(event: 'confirmed', listener: (...args: PublishEvents['confirmed']) => void): unknown;
  on(event: 'retry' | 'failed', listener: (...args: PublishEvents['retry' | 'failed']) => void): unknown;
}

function instrumentPublishing(relay: PublishingRelay, registry: client.Registry): void {
  const published = counter(
    registry,
    'converge_relay_published_total',
    'Events confirmed by the broker and marked published.',
  );
  const confirmLatency = histogram(
    registry,
    'converge_relay_confirm_seconds',
    'Time from writing a publish to the broker confirm.',
    CONFIRM_BUCKETS,
  );
  const failures = counter(
    registry,
    'converge_relay_publish_failures_total',
    'Publishes not confirmed, by reason (returned, nacked, confirm-timeout, channel-closed, unencodable).',
    ['reason'],
  );
  relay.on('published', (eventIds) => published.inc(eventIds.length));
  relay.on('confirmed', (latenciesMs) => {
    for (const ms of latenciesMs) confirmLatency.observe(ms / 1000);
  });
  relay.on('retry', (info) => failures.inc({ reason: info.reason }));
  relay.on('failed', (info) => failures.inc({ reason: info.reason }));
}

const BROKER_BLOCKED = {
  name: 'converge_relay_broker_blocked',
  help: "1 while RabbitMQ blocks the relay's connection (a memory or disk alarm): publishing paused, no attempts counted.",
};

const LOCK_HELD = {
  name: 'converge_relay_active',
  help: 'With claim exclusive: 1 while this relay holds the relay lock and publishes, 0 while it waits as a standby.',
};

/** Events given up on, a blocked broker connection and, with claim exclusive, holding the relay lock. */
function registerPollingInstruments(relay: Relay, registry: client.Registry): void {
  const failed = counter(
    registry,
    'converge_relay_failed_total',
    'Events that reached maxAttempts and are kept as failed.',
  );
  const blocked = eventGauge(registry, BROKER_BLOCKED);
  relay.on('blocked', () => blocked.set(1));
  relay.on('unblocked', () => blocked.set(0));
  relay.on('failed', () => failed.inc());
  if (relay.options.claim === 'exclusive') {
    const active = eventGauge(registry, LOCK_HELD);
    relay.on('active', () => active.set(1));
    relay.on('standby', () => active.set(0));
  }
}

/**
 * What only the slot has: the WAL it retains (the disk risk of a stuck slot, the first thing to
 * alert on), the age of the oldest event received and not yet confirmed, and whether this relay
 * streams or waits as a standby.
 */
function registerSlotGauges(relay: CdcRelay, registry: client.Registry): void {
  const readSlot = databaseRead(registry, () => showCdcSlot(relay.pool, relay.options.slot));
  scrapedGauge(
    registry,
    'converge_cdc_slot_retained_wal_bytes',
    "WAL PostgreSQL keeps for the CDC relay's slot (pg_current_wal_lsn() - restart_lsn); grows while the slot is stuck or no relay runs. NaN when unreadable.",
    async () => {
      const slot = await readSlot();
      return slot ? slot.retainedWalBytes : NaN;
    },
  );
  scrapedGauge(
    registry,
    'converge_cdc_oldest_unconfirmed_seconds',
    'Age of the oldest event received from the slot and not yet confirmed by the broker (0 when none).',
    () => relay.oldestUnconfirmedAgeMs / 1000,
  );
  scrapedGauge(
    registry,
    'converge_cdc_relay_active',
    '1 while this relay holds the slot and streams, 0 while it waits as a standby or is not running.',
    () => (relay.state === 'active' ? 1 : 0),
  );
}
