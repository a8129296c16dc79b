export { Relay, startRelay } from './relay.js';
export type { RelayCycleResult, RelayEvents } from './relay.js';
export type { RelayOptions, RelayHooks } from './options.js';
