/**
 * The stall-diagnosis table: from durable facts about each stage (source rows, outbox,
 * broker queues, inbox, projection, reorder buffer) to findings that say which stage to
 * look at, the evidence, and what shows the recovery. Pure: the facts are gathered elsewhere.
 */
import { formatBytes } from '../runtime/bytes.js';

export interface SourceFacts {
  /** What the user configured, e.g. `public.orders`. */
  source: string;
  aggregateType: string;
  /** Source rows whose version is above the newest outbox event of their aggregate. */
  ahead: number;
  /** A few of their ids (ids only, never row contents). */
  sampleIds: string[];
}

export interface OutboxFacts {
  pending: number;
  failed: number;
  oldestPendingAgeSeconds: number | null;
  /** Events appended per second during the sample. */
  arrivalPerSecond: number;
  /** Events published per second during the sample. */
  publishedPerSecond: number;
  /** Pending count at the start and end of the sample. */
  pendingBefore: number;
}

export interface QueueFacts {
  queue: string;
  consumer: string;
  projection?: string;
  /** null: the queue does not exist on the broker. */
  depth: number | null;
  depthBefore: number | null;
  consumers: number | null;
  /** Inbox rows this consumer recorded during the sample, per second. */
  completedPerSecond: number;
  /** Inbox rows this consumer recorded in the window. */
  inboxInWindow: number;
  /** projection_state rows of `projection` changed in the window (when a projection is named). */
  projectionUpdatesInWindow?: number;
}

export interface GapFacts {
  /** Aggregates whose next version has been missing longer than the stall threshold. */
  stuckAggregates: number;
  oldestAgeSeconds: number | null;
  parked: number;
  sample: {
    consumer: string;
    aggregateType: string;
    aggregateId: string;
    currentVersion: number;
    parkedVersions: number[];
  }[];
}

export interface FailureFacts {
  outboxFailed: number;
  /** Open quarantine rows by reason. */
  quarantined: Record<string, number>;
}

/** A CDC relay's replication slot as pg_replication_slots shows it. */
export interface CdcSlotFacts {
  slot: string;
  /** false: the server has no replication slot of that name. */
  exists: boolean;
  /** A walsender holds the slot: a CDC relay streams from it. */
  active: boolean;
  /** WAL the server keeps for the slot and may not recycle: it grows while nothing acknowledges. */
  retainedWalBytes: number;
  /** reserved, extended, unreserved or lost (max_slot_wal_keep_size exceeded); null before PostgreSQL 13. */
  walStatus: string | null;
}

export interface PipelineFacts {
  windowSeconds: number;
  sampleSeconds: number;
  stallAfterSeconds: number;
  sources: SourceFacts[];
  outbox: OutboxFacts;
  /** The CDC relays' slots asked about (none with the polling relay). */
  cdcSlots: CdcSlotFacts[];
  /** Retained WAL at or above this is a warning even while a relay streams. */
  cdcRetainedWalWarnBytes: number;
  queues: QueueFacts[];
  gaps: GapFacts;
  failures: FailureFacts;
}

export type Stage = 'producer' | 'relay' | 'broker' | 'consumer' | 'projection' | 'ordering';

export interface Finding {
  kind:
    | 'source-without-event'
    | 'outbox-growing'
    | 'outbox-failed'
    | 'cdc-slot-missing'
    | 'cdc-slot-lost'
    | 'cdc-slot-inactive'
    | 'cdc-slot-retaining-wal'
    | 'broker-backlog'
    | 'queue-missing'
    | 'inbox-without-projection'
    | 'missing-versions'
    | 'quarantined';
  severity: 'stalled' | 'warning';
  stage: Stage;
  /** What the finding is about when a stage has several: the source table or the queue. */
  subject?: string;
  /** The facts that triggered the finding: counts, ages and ids, never payloads. */
  evidence: string;
  lookAt: string;
  /** What shows that the stage recovered. */
  recovered: string;
}

export interface Throughput {
  arrivalPerSecond: number;
  completionPerSecond: number;
  backlog: number;
  /** Seconds to empty the backlog at the current net rate; null when it is not shrinking. */
  drainSeconds: number | null;
}

/** Net drain: a backlog only empties at completion minus arrival, e.g. (500 − 300)/s for 300 new per second. */
export function drainEstimate(backlog: number, arrivalPerSecond: number, completionPerSecond: number): Throughput {
  const net = completionPerSecond - arrivalPerSecond;
  return {
    arrivalPerSecond,
    completionPerSecond,
    backlog,
    drainSeconds: backlog === 0 ? 0 : net > 0 ? backlog / net : null,
  };
}

/** Throughput of the relay: appended vs published, over the pending backlog. */
export function relayThroughput(outbox: OutboxFacts): Throughput {
  return drainEstimate(outbox.pending, outbox.arrivalPerSecond, outbox.publishedPerSecond);
}

/**
 * Throughput of one queue: completion is what the consumer recorded; arrival is that plus
 * the growth of the ready backlog (a shrinking backlog means arrivals below completion).
 */
export function queueThroughput(queue: QueueFacts, sampleSeconds: number): Throughput {
  const growth =
    queue.depth !== null && queue.depthBefore !== null && sampleSeconds > 0
      ? (queue.depth - queue.depthBefore) / sampleSeconds
      : 0;
  return drainEstimate(queue.depth ?? 0, Math.max(0, queue.completedPerSecond + growth), queue.completedPerSecond);
}

export function diagnose(facts: PipelineFacts): Finding[] {
  return [
    ...facts.sources.flatMap(sourceFinding),
    ...outboxFindings(facts),
    ...facts.cdcSlots.flatMap((slot) => cdcSlotFindings(slot, facts)),
    ...facts.queues.flatMap((queue) => queueFindings(queue, facts)),
    ...gapFindings(facts.gaps, facts.stallAfterSeconds),
    ...quarantineFindings(facts.failures),
  ];
}

function sourceFinding(source: SourceFacts): Finding[] {
  if (source.ahead === 0) return [];
  return [
    {
      kind: 'source-without-event',
      severity: 'stalled',
      stage: 'producer',
      subject: source.source,
      evidence: `${source.ahead} ${source.source} row(s) at a version with no outbox event for ${source.aggregateType} (e.g. ${source.sampleIds.join(', ')})`,
      lookAt:
        'writes that bypass appendToOutbox, or append on another connection or transaction than the business update',
      recovered:
        'every business version has its outbox event (re-run status); repair the projection with converge reconcile --repair',
    },
  ];
}

function outboxFindings(facts: PipelineFacts): Finding[] {
  const { outbox } = facts;
  const findings: Finding[] = [];
  const throughput = relayThroughput(outbox);
  const oldest = outbox.oldestPendingAgeSeconds ?? 0;
  const growing = outbox.pending > outbox.pendingBefore && outbox.publishedPerSecond < outbox.arrivalPerSecond;
  if (outbox.pending > 0 && (oldest > facts.stallAfterSeconds || growing)) {
    findings.push({
      kind: 'outbox-growing',
      severity: oldest > facts.stallAfterSeconds ? 'stalled' : 'warning',
      stage: 'relay',
      evidence: `${outbox.pending} unpublished (${signed(outbox.pending - outbox.pendingBefore)} in ${facts.sampleSeconds} s), oldest ${round(oldest)} s; appended ${round(throughput.arrivalPerSecond)}/s, published ${round(throughput.completionPerSecond)}/s`,
      lookAt:
        'is a relay running and claiming (claimed_by, next_attempt_at)? broker returns and nacks (last_error in converge outbox list --pending), AMQP connection and credentials',
      recovered: 'the oldest pending age falls and published rows advance',
    });
  }
  if (outbox.failed > 0) {
    findings.push({
      kind: 'outbox-failed',
      severity: 'stalled',
      stage: 'relay',
      evidence: `${outbox.failed} event(s) reached the relay's attempt limit; later versions of their aggregates wait behind them`,
      lookAt:
        'converge outbox list --failed (last_error: CONVERGE_PUBLISH_RETURNED = unroutable, CONVERGE_PUBLISH_UNENCODABLE)',
      recovered: 'converge outbox retry publishes them; the failed count is 0',
    });
  }
  return findings;
}

/**
 * A slot nothing reads keeps every WAL segment written since its confirmed position: the server's
 * disk fills at the write rate of the whole database, not only of the outbox. The oldest pending
 * outbox row is the age of the oldest event not yet confirmed and marked.
 */
function cdcSlotFindings(slot: CdcSlotFacts, facts: PipelineFacts): Finding[] {
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

function queueFindings(queue: QueueFacts, facts: PipelineFacts): Finding[] {
  if (queue.depth === null) {
    return [
      {
        kind: 'queue-missing',
        severity: 'stalled',
        stage: 'broker',
        subject: queue.queue,
        evidence: `queue ${queue.queue} does not exist on the broker`,
        lookAt:
          'the consumer never declared it, or it was deleted: events routed to it are returned to the relay (unroutable)',
        recovered: 'the queue exists and is bound; the consumer subscribes',
      },
    ];
  }
  const findings: Finding[] = [];
  const shrinking = queue.depthBefore !== null && queue.depth < queue.depthBefore;
  if (queue.depth > 0 && queue.completedPerSecond === 0 && !shrinking) {
    findings.push({
      kind: 'broker-backlog',
      severity: 'stalled',
      stage: 'consumer',
      subject: queue.queue,
      evidence: `${queue.queue}: ${queue.depth} ready message(s), ${queue.consumers ?? 0} subscriber(s), no inbox row for ${queue.consumer} in ${facts.sampleSeconds} s`,
      lookAt:
        'consumer connection and credentials, queue permissions, database locks (pg_stat_activity), handler errors in the logs',
      recovered: 'inbox commit rate recovers while unacknowledged deliveries stay within prefetch',
    });
  }
  if (queue.projection !== undefined && queue.inboxInWindow > 0 && queue.projectionUpdatesInWindow === 0) {
    findings.push({
      kind: 'inbox-without-projection',
      severity: 'stalled',
      stage: 'projection',
      subject: queue.queue,
      evidence: `${queue.inboxInWindow} inbox row(s) for ${queue.consumer} in ${facts.windowSeconds} s, no change to projection ${queue.projection}`,
      lookAt:
        'is the inbox committed before the projection write? does the handler check its updated row counts? does it write another projection?',
      recovered: 'the missing results are repaired (converge reconcile --repair) and new events change the projection',
    });
  }
  return findings;
}

function gapFindings(gaps: GapFacts, stallAfterSeconds: number): Finding[] {
  if (gaps.stuckAggregates === 0) return [];
  const examples = gaps.sample
    .map((g) => `${g.aggregateType}/${g.aggregateId} at ${g.currentVersion}, waiting ${g.parkedVersions.join(',')}`)
    .join('; ');
  return [
    {
      kind: 'missing-versions',
      severity: 'stalled',
      stage: 'ordering',
      evidence: `${gaps.stuckAggregates} aggregate(s) missing a version for over ${stallAfterSeconds} s, oldest ${round(gaps.oldestAgeSeconds ?? 0)} s (${examples})`,
      lookAt:
        'routing of the aggregate (partitioning), the retry queue, a lost or quarantined predecessor (converge dlq list), a poison message',
      recovered:
        'the missing version arrives or is repaired (repairGaps(consumer, …), converge reconcile --repair) and later increments apply',
    },
  ];
}

function quarantineFindings(failures: FailureFacts): Finding[] {
  const total = Object.values(failures.quarantined).reduce((sum, n) => sum + n, 0);
  if (total === 0) return [];
  const byReason = Object.entries(failures.quarantined)
    .map(([reason, n]) => `${reason} ${n}`)
    .join(', ');
  return [
    {
      kind: 'quarantined',
      severity: 'warning',
      stage: 'consumer',
      evidence: `${total} open quarantined message(s): ${byReason}`,
      lookAt: 'converge dlq list, then replay (after a fix) or discard with a reason',
      recovered: 'no open quarantined message',
    },
  ];
}

function round(n: number): string {
  return n >= 100 ? n.toFixed(0) : n.toFixed(1);
}

function signed(n: number): string {
  return n >= 0 ? `+${n}` : String(n);
}
