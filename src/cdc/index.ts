export { CdcRelay, startCdcRelay } from './cdc-relay.js';
export { cdcRelayOptions, DEFAULT_CDC_SLOT } from './options.js';
export type { CdcRelayOptions, ResolvedCdcRelayOptions } from './options.js';
export type { CdcRelayEvents, CdcRelayState } from './types.js';
export { createCdcSlot, dropCdcSlot, showCdcSlot, type SlotInfo } from './slot-sql.js';
