/**
 * `converge/metrics`: prom-client instruments, attached to a relay or consumer from outside.
 * A subpath of its own so that services which do not scrape metrics never load prom-client.
 */
export {
  registerConvergenceMetrics,
  instrumentConsumer,
  serveConsumerMetrics,
  convergenceMetricsOptions,
} from './metrics.js';
export { instrumentRelay, serveRelayMetrics } from './relay.js';
export { serveTenantMetrics } from './tenants.js';
export { serveMetrics, serveMetricsOptions } from './server.js';
export type { ConvergenceMetricsOptions, MetricsEndpoint, ServedMetrics } from './metrics.js';
