/**
 * The stall-diagnosis table: from durable facts about each stage (source rows, outbox,
 * broker queues, inbox, projection, reorder buffer) to findings that say which stage to
 * look at, the evidence, and what shows the recovery. Pure: the facts are gathered elsewhere.
 */
import { cdcSlotFindings } from './diagnose-cdc.js';
import { horizonFindings } from './diagnose-horizon.js';
import { partitionFindings } from './partition-facts.js';
import {
  round,
  type FailureFacts,
  type Finding,
  type GapFacts,
  type OutboxFacts,
  type PipelineFacts,
  type QueueFacts,
  type SourceFacts,
} from './facts.js';

/** Rates are null when the status was read once, without a sample (sampleMs 0). */
export interface Throughput {
  arrivalPerSecond: number | null;
  completionPerSecond: number | null;
  backlog: number;
  /** Seconds to empty the backlog at the current net rate; null when it is not shrinking. */
  drainSeconds: number | null;
}

/** Net drain: a backlog only empties at completion minus arrival, e.g. (500 − 300)/s for 300 new per second. */
export function drainEstimate(
  backlog: number,
  arrivalPerSecond: number | null,
  completionPerSecond: number | null,
): Throughput {
  const net = arrivalPerSecond === null || completionPerSecond === null ? null : completionPerSecond - arrivalPerSecond;
  return {
    arrivalPerSecond,
    completionPerSecond,
    backlog,
    drainSeconds: backlog === 0 ? 0 : net !== null && net > 0 ? backlog / net : null,
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
  if (queue.completedPerSecond === null) return drainEstimate(queue.depth ?? 0, null, null);
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
    ...effectFindings(facts.failures, facts.stallAfterSeconds),
    ...horizonFindings(facts.horizon),
    ...partitionFindings(facts.partitions),
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
  const oldest = outbox.oldestPendingAgeSeconds ?? 0;
  const { arrivalPerSecond: arrived, publishedPerSecond: published } = outbox;
  const growing =
    arrived !== null && published !== null && outbox.pending > outbox.pendingBefore && published < arrived;
  const evidence =
    arrived === null
      ? `${outbox.pending} unpublished, oldest ${round(oldest)} s (rates not sampled)`
      : `${outbox.pending} unpublished (${signed(outbox.pending - outbox.pendingBefore)} in ${facts.sampleSeconds} s), oldest ${round(oldest)} s; appended ${round(arrived)}/s, published ${round(published ?? 0)}/s`;
  if (outbox.pending > 0 && (oldest > facts.stallAfterSeconds || growing)) {
    findings.push({
      kind: 'outbox-growing',
      severity: oldest > facts.stallAfterSeconds ? 'stalled' : 'warning',
      stage: 'relay',
      evidence,
      lookAt:
        'is a relay running and claiming (claimed_by, next_attempt_at; with claim exclusive, converge_relay_active on one relay)? broker returns and nacks (last_error in converge outbox list --pending), AMQP connection and credentials',
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

function effectFindings(failures: FailureFacts, stallAfterSeconds: number): Finding[] {
  const { effects } = failures;
  const names = effects.sampleEffects.length > 0 ? ` (${effects.sampleEffects.join(', ')})` : '';
  const findings: Finding[] = [];
  if (effects.failed > 0)
    findings.push({
      kind: 'effects-failed',
      severity: 'warning',
      stage: 'consumer',
      evidence: `${effects.failed} remote effect key(s) failed for good${names}; they are never called again on their own`,
      lookAt:
        'the effects table (status failed: effect, error, attempts), fix the cause at the remote, then retryFailedEffect(pool, { event, effect })',
      recovered: 'no failed effect key',
    });
  if (effects.stalePending > 0)
    findings.push({
      kind: 'effects-outcome-unknown',
      severity: 'warning',
      stage: 'consumer',
      evidence: `${effects.stalePending} remote effect key(s) pending for over ${stallAfterSeconds} s${names}: called, outcome never recorded`,
      lookAt:
        'a worker that died between the call and its record, or retries that ran out: the next delivery (or a replay) calls again with the same idempotency key; check the remote by that key',
      recovered: 'the keys complete or fail (no pending key older than the threshold)',
    });
  return findings;
}

function signed(n: number): string {
  return n >= 0 ? `+${n}` : String(n);
}
