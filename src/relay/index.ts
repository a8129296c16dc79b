export { Relay, startRelay } from './relay.js';
export { outboxRowToEnvelope } from './row.js';
export type { OutboxEnvelopeRow } from './sql.js';
export type { RelayCycleResult, RelayEvents, RelayRetryInfo } from './relay.js';
export type { RelayOptions, RelayHooks, ResolvedRelayOptions } from './options.js';
export { relayOptions } from './options.js';
// For the CDC relay (src/cdc), which publishes the same rows the same way.
export { publishableEnvelope } from './row.js';
export { chargedToEvent } from './failures.js';
export { routingKeyOption } from './options.js';
