import type { AddressInfo } from 'node:net';
import type pg from 'pg';
import client from 'prom-client';
import { z } from 'zod';
import { gapAfterMsOption, lagBudgetsOption, listenShape } from '../runtime/option-fields.js';
import { defineOptions, parseOptions, poolOption, type OptionsInput, schemaOption } from '../runtime/options.js';
import { schemaRef } from '../runtime/identifier.js';

import { registerLagBudgetGauges, registerOutboxGauges, registerReorderGauges } from './database-gauges.js';
import type { Consumer, Settlement } from '../inbox/index.js';
import { registerBrokerConnected } from './health.js';
import { pingDatabase } from '../db/pool.js';
import { serveMetrics } from './server.js';
import { counter, histogram } from './instruments.js';

const registryOption = z
  .custom<client.Registry>((v) => v instanceof client.Registry, 'must be a prom-client Registry')
  .meta({ typeName: 'prom-client Registry' });

export const convergenceMetricsOptions = defineOptions(
  'registerConvergenceMetrics',
  z.strictObject({
    schema: schemaOption,
    gapAfterMs: gapAfterMsOption
      .default(60_000)
      .describe('An aggregate counts as a gap once its oldest parked event waited this long, in ms.'),
    registry: registryOption.optional().describe('Registry to register the gauges in; a new one otherwise.'),
    lagBudgets: lagBudgetsOption.describe(
      'Acceptable end-to-end lag in ms, by consumer (inbox scope): adds converge_lag_budget_seconds, converge_lag_p99_seconds and converge_lag_over_budget for each.',
    ),
    lagWindowMs: z
      .number()
      .int()
      .min(1)
      .default(60_000)
      .describe('Window the p99 lag against the budgets is taken over, in ms.'),
  }),
);

export type ConvergenceMetricsOptions = OptionsInput<typeof convergenceMetricsOptions>;

/**
 * Gauges read from the database at scrape time, so every process (and the CLI) reports the
 * same durable truth: events in the reorder buffer, aggregates stuck on a missing version,
 * and how long the oldest has waited, per consumer.
 */
export function registerConvergenceMetrics(pool: pg.Pool, input: ConvergenceMetricsOptions = {}): client.Registry {
  parseOptions(poolOption, pool, 'pool');
  const options = convergenceMetricsOptions.parse(input);
  const registry = options.registry ?? new client.Registry();
  const schema = schemaRef(options.schema);
  registerReorderGauges(registry, pool, schema, options.gapAfterMs);
  registerOutboxGauges(registry, pool, schema);
  if (Object.keys(options.lagBudgets).length > 0)
    registerLagBudgetGauges(registry, pool, schema, options.lagBudgets, options.lagWindowMs);
  return registry;
}

/** Seconds; from a millisecond to an hour of lag. */
const LAG_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600];

/** Counts a consumer's settlements by outcome, quarantines by reason, and events drained from the reorder buffer. */
export function instrumentConsumer(consumer: Consumer, registry: client.Registry): void {
  const deliveries = counter(
    registry,
    'converge_consumer_deliveries_total',
    'Deliveries settled, by outcome (applied, duplicate, ignored, parked, quarantined, retry).',
    ['outcome'],
  );
  const quarantined = counter(registry, 'converge_consumer_quarantined_total', 'Deliveries quarantined, by reason.', [
    'reason',
  ]);
  const drained = counter(
    registry,
    'converge_consumer_drained_total',
    'Parked events that left the reorder buffer, by outcome.',
    ['outcome'],
  );
  const conflicts = counter(
    registry,
    'converge_consumer_conflicts_total',
    'Same eventId with other content: quarantined for a person, never applied.',
  );
  const untrusted = counter(
    registry,
    'converge_consumer_untrusted_headers_total',
    "Converge headers (attempt, origin, replay) a delivery carried without converge's valid signature, so ignored, by header.",
    ['header'],
  );
  const lag = histogram(
    registry,
    'converge_consumer_lag_seconds',
    "From the event's occurredAt (the producer's clock) to the consumer's commit, for applied events.",
    LAG_BUCKETS,
  );
  const observeLag = (settlement: Settlement) => {
    if (settlement.action === 'ack' && settlement.outcome === 'applied')
      lag.observe(Math.max(0, Date.now() - Date.parse(settlement.occurredAt)) / 1000);
  };
  consumer.on('settled', (settlement) => {
    deliveries.inc({ outcome: settlement.action === 'retry' ? 'retry' : settlement.outcome });
    if (settlement.action === 'ack' && settlement.outcome === 'quarantined')
      quarantined.inc({ reason: settlement.reason });
    for (const header of settlement.untrustedHeaders ?? []) untrusted.inc({ header });
    observeLag(settlement);
  });
  consumer.on('drained', (settlement) => {
    drained.inc({ outcome: settlement.action === 'retry' ? 'retry' : settlement.outcome });
    observeLag(settlement);
  });
  consumer.on('conflict', () => conflicts.inc());
}

/** Where a relay or consumer serves its own metrics; `registry` to add them to one of yours. */
export const metricsEndpointOptions = defineOptions(
  'metrics endpoint',
  z.strictObject({
    port: listenShape.port.describe('Port to serve /metrics, /healthz and /readyz on (0 picks a free one).'),
    host: listenShape.host,
    registry: registryOption.optional().describe('Registry to add the instruments to; a new one otherwise.'),
    gapAfterMs: gapAfterMsOption
      .default(60_000)
      .describe("For the consumer's gap gauge: an aggregate counts as a gap after waiting this long, in ms."),
  }),
);

export type MetricsEndpoint = z.input<typeof metricsEndpointOptions.schema>;

export interface ServedMetrics {
  registry: client.Registry;
  /** `http://host:port` once listening (port 0 picks a free one). */
  url: Promise<string>;
  close(): Promise<void>;
}

/**
 * A consumer's counters, lag histogram and reorder-buffer gauges, served until `close()`;
 * /readyz answers 200 while it is subscribed and its database answers `SELECT 1`, and
 * /healthz 503 only once a permanent misconfiguration stopped it.
 */
export function serveConsumerMetrics(consumer: Consumer, input: MetricsEndpoint): ServedMetrics {
  const endpoint = metricsEndpointOptions.parse(input);
  const registry = endpoint.registry ?? new client.Registry();
  instrumentConsumer(consumer, registry);
  registerReorderGauges(registry, consumer.pool, schemaRef(consumer.options.schema), endpoint.gapAfterMs);
  registerBrokerConnected(registry, () => consumer.subscribed);
  return serveUntilClosed(registry, endpoint, {
    ready: async () => consumer.subscribed && (await pingDatabase(consumer.pool)),
    live: () => consumer.failure === undefined,
  });
}

export function serveUntilClosed(
  registry: client.Registry,
  endpoint: { port: number; host: string },
  probes: { ready: () => boolean | Promise<boolean>; live: () => boolean },
): ServedMetrics {
  const host = endpoint.host;
  const listening = serveMetrics(registry, { port: endpoint.port, host, ...probes });
  // A port already taken must not become an unhandled rejection; url and close() report it.
  listening.catch(() => undefined);
  return {
    registry,
    url: listening.then((server) => `http://${host}:${(server.address() as AddressInfo).port}`),
    close: () =>
      listening.then(
        (server) => new Promise<void>((resolve) => server.close(() => resolve())),
        () => undefined,
      ),
  };
}
