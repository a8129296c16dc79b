import type { PublishEvents, RelayRetryInfo } from '../types.js';

/** Where a CDC relay stands: streaming from the slot, waiting for another relay to free it, or neither. */
export type CdcRelayState = 'starting' | 'active' | 'standby' | 'stopped';

/** The typed events a CDC relay emits; the names the polling relay also has mean the same. */
export interface CdcRelayEvents extends PublishEvents {
  /** The broker did not take an event: the stream stopped at it and restarts from the slot after a backoff. */
  retry: [info: RelayRetryInfo];
  /** A row no consumer could accept was marked failed and passed over (as the polling relay does). */
  failed: [info: RelayRetryInfo];
  /** This relay holds the slot and streams. */
  active: [];
  /** Another relay holds the slot (`holderPid`: its walsender, when known); this one retries until it frees. */
  standby: [holderPid: number | null];
  /** The slot was advanced to `lsn`: every event committed up to it is confirmed and marked. */
  acknowledged: [lsn: string];
  error: [err: Error];
}
