export { Converge, createConverge } from './converge.js';
export type { RelayOwnOptions, CdcRelayOwnOptions, ConsumerOwnOptions, ReconcileOwnOptions } from './converge.js';
export { convergeOptions } from './options.js';
export type { ConvergeOptions } from './options.js';
