export { Relay, startRelay } from './relay.js';
export { outboxRowToEnvelope } from './row.js';
export { OutboxListener } from './wakeup.js';
export type { OutboxEnvelopeRow } from './sql.js';
export type { RelayCycleResult, RelayEvents, RelayRetryInfo } from './relay.js';
export type { PublishEvents } from './types.js';
export type { RelayOptions, RelayHooks, ResolvedRelayOptions } from './options.js';
export { relayOptions } from './options.js';
// The CDC relay: the same rows published the same way, fed by a logical replication slot instead of claims.
export { CdcRelay, startCdcRelay } from './cdc/cdc-relay.js';
export { cdcRelayOptions, DEFAULT_CDC_SLOT } from './cdc/options.js';
export type { CdcRelayOptions, ResolvedCdcRelayOptions } from './cdc/options.js';
export type { CdcRelayEvents, CdcRelayState } from './cdc/types.js';
export { createCdcSlot, dropCdcSlot, showCdcSlot, type SlotInfo } from './cdc/slot-sql.js';
