/** The stall diagnosis of a CDC relay's replication slot (see diagnose.ts for the other stages). */
import { formatBytes } from '../runtime/bytes.js';
import { round, type CdcSlotFacts, type Finding, type PipelineFacts } from './facts.js';

/**
 * A slot nothing reads keeps every WAL segment written since its confirmed position: the server's
 * disk fills at the write rate of the whole database, not only of the outbox. The oldest pending
 * outbox row is the age of the oldest event not yet confirmed and marked.
 */
export function cdcSlotFindings(slot: CdcSlotFacts, facts: PipelineFacts): Finding[] {
  const base = { stage: 'relay' as const, subject: slot.slot };
  const retained = `retains ${formatBytes(slot.retainedWalBytes)} of WAL`;
  const oldest = facts.outbox.oldestPendingAgeSeconds ?? 0;
  const waiting = `${facts.outbox.pending} event(s) not yet published and marked, oldest ${round(oldest)} s`;
  if (!slot.exists)
    return [
      {
        ...base,
        kind: 'cdc-slot-missing',
        severity: 'stalled',
        evidence: `no replication slot ${slot.slot} on the server; ${waiting}`,
        lookAt: `converge cdc slot create --slot ${slot.slot} (the CDC relay streams what is committed after it), or run the polling relay`,
        recovered: 'converge cdc slot show lists the slot with an active pid, and pending rows are marked',
      },
    ];
  if (slot.walStatus === 'lost')
    return [
      {
        ...base,
        kind: 'cdc-slot-lost',
        severity: 'stalled',
        evidence: `slot ${slot.slot} is invalidated (wal_status lost: max_slot_wal_keep_size was exceeded); ${waiting}`,
        lookAt:
          'the WAL the slot needed is gone: run the polling relay to publish the pending rows, then drop and create the slot (converge cdc slot drop / create)',
        recovered: 'the pending count reaches 0 and a new slot streams (wal_status reserved)',
      },
    ];
  if (!slot.active)
    return [
      {
        ...base,
        kind: 'cdc-slot-inactive',
        severity: oldest > facts.stallAfterSeconds ? 'stalled' : 'warning',
        evidence: `no CDC relay streams from slot ${slot.slot}; it ${retained} and keeps growing; ${waiting}`,
        lookAt:
          'is a CDC relay running (converge relay --mode cdc)? its logs for a refused login or a fatal error (converge_cdc_relay_active)',
        recovered: 'converge cdc slot show has an active pid and the retained WAL falls',
      },
    ];
  if (slot.retainedWalBytes >= facts.cdcRetainedWalWarnBytes)
    return [
      {
        ...base,
        kind: 'cdc-slot-retaining-wal',
        severity: 'warning',
        evidence: `slot ${slot.slot} ${retained} (warning at ${formatBytes(facts.cdcRetainedWalWarnBytes)}) while a relay streams; ${waiting}`,
        lookAt:
          'a stream stopped at an event the broker refuses (converge outbox list --pending: last_error, broker_retries) or a relay that cannot keep up (converge_cdc_oldest_unconfirmed_seconds)',
        recovered: 'the retained WAL falls after the next acknowledgement',
      },
    ];
  return [];
}
