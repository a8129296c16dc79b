import type pg from 'pg';
import { quoteIdentifier, schemaRef, type SchemaRef } from '../runtime/identifier.js';
import { showCdcSlot } from '../relay/index.js';
import { readGaps } from '../inbox/index.js';
import { RabbitMqTransport } from '../transport/rabbitmq.js';
import type { TransportConnection } from '../transport/transport.js';
import { withConnection } from '../transport/short-lived.js';
import { parseOptions, poolOption } from '../runtime/options.js';
import {
  pipelineStatusOptions,
  type PipelineStatusOptions,
  type ResolvedPipelineStatusOptions,
  type ResolvedSourceTable,
} from './pipeline-options.js';
import { diagnose, queueThroughput, relayThroughput, type Throughput } from './diagnose.js';
import type {
  CdcSlotFacts,
  EffectFacts,
  Finding,
  GapFacts,
  HorizonFacts,
  PartitionFacts,
  HorizonHolder,
  OutboxFacts,
  PipelineFacts,
  QueueFacts,
  SourceFacts,
} from './facts.js';
import { readFailedReasons, readLag, readReorderBuffer, type ConsumerLag } from './gauges.js';
import { judgeLagBudgets, lagBudgetFindings, type LagBudgetFacts } from './lag-budget.js';
import { horizonHoldersSql, opsSql, sourceAheadSql } from './sql.js';
import { partitionFacts } from './partition-facts.js';

export type { ConsumerLag } from './gauges.js';
export type { LagBudgetFacts } from './lag-budget.js';

export interface PipelineStatus {
  checkedAt: string;
  windowSeconds: number;
  sampleSeconds: number;
  stallAfterSeconds: number;
  sources: SourceFacts[];
  /** failedReasons: failed rows per reason (last_error), the 20 most common. */
  outbox: OutboxFacts & { throughput: Throughput; failedReasons: Record<string, number> };
  cdcSlots: CdcSlotFacts[];
  queues: (QueueFacts & { throughput: Throughput })[];
  gaps: GapFacts;
  failures: PipelineFacts['failures'];
  /** What holds back vacuum's xmin horizon, the furthest behind first. */
  horizon: HorizonFacts;
  /** A partitioned outbox and inbox: how far ahead their partitions reach (empty for the plain layout). */
  partitions: PartitionFacts[];
  lag: ConsumerLag[];
  /** Each lag budget asked for, against the lag of the consumer it names. */
  lagBudgets: LagBudgetFacts[];
  findings: Finding[];
  /** Any finding of severity `stalled`. */
  stalled: boolean;
}

export {
  pipelineStatusOptions,
  type PipelineStatusOptions,
  type SourceTable,
  type WatchedQueue,
} from './pipeline-options.js';

const SOURCE_LIMIT = 1_000;
const SAMPLE_IDS = 5;

/**
 * The stall-diagnosis table from durable progress: reads the outbox and the broker queues once
 * (or twice, `sampleMs` apart, for rates and drain times); reads the inbox, projection state, reorder buffer and
 * quarantine for the rest. Read-only; safe to run against production at any time.
 */
export async function readPipelineStatus(pool: pg.Pool, input: PipelineStatusOptions = {}): Promise<PipelineStatus> {
  parseOptions(poolOption, pool, 'pool');
  const options = pipelineStatusOptions.parse(input);
  // Checked before any connection is opened: a bad name never reaches the broker either.
  const schema = schemaRef(options.schema);
  const read = (broker?: TransportConnection) => readWith(pool, options, schema, broker);
  if (options.queues.length === 0) return read();
  return withConnection(new RabbitMqTransport({ urls: options.amqpUrl! }), 'converge-status', read);
}

/** The status, with queue depths from `broker` when queues are watched. */
async function readWith(
  pool: pg.Pool,
  options: ResolvedPipelineStatusOptions,
  schema: SchemaRef,
  broker: TransportConnection | undefined,
): Promise<PipelineStatus> {
  const sql = opsSql(schema);
  const { windowMs, sampleMs, stallAfterMs } = options;
  const queues = options.queues.map((q) => ({ ...q, consumer: q.consumer ?? q.queue }));
  // sampleMs 0 (the default): one reading, fast, and no rates; otherwise two, sampleMs apart.
  const sampled = sampleMs > 0;
  const names = queues.map((q) => q.queue);
  const before = await sampleOutbox(pool, sql);
  const depthsBefore = await queueDepths(broker, names);
  if (sampled) await new Promise((resolve) => setTimeout(resolve, sampleMs));
  const after = sampled ? await sampleOutbox(pool, sql) : before;
  const depthsAfter = sampled ? await queueDepths(broker, names) : depthsBefore;
  const seconds = sampled ? Math.max(0.001, (after.sampledAt.getTime() - before.sampledAt.getTime()) / 1000) : 0;
  const perSecond = (count: number): number | null => (sampled ? count / seconds : null);

  const appended = Math.max(0, after.maxPosition - before.maxPosition);
  const outbox: OutboxFacts = {
    pending: after.pending,
    failed: after.failed,
    oldestPendingAgeSeconds: after.oldestPendingAgeSeconds,
    pendingBefore: before.pending,
    arrivalPerSecond: perSecond(appended),
    publishedPerSecond: perSecond(Math.max(0, appended - (after.pending - before.pending))),
  };
  const recorded = sampled
    ? await countRows<{ consumer: string }>(
        pool,
        sql.inboxSince,
        [before.sampledAt, queues.map((q) => q.consumer)],
        (r) => r.consumer,
      )
    : new Map<string, number>();
  const inWindow = await countRows<{ consumer: string }>(
    pool,
    sql.inboxSince,
    [new Date(after.sampledAt.getTime() - windowMs), queues.map((q) => q.consumer)],
    (r) => r.consumer,
  );
  const projections = queues.flatMap((q) => (q.projection ? [q.projection] : []));
  const updates = await countRows<{ projection: string }>(
    pool,
    sql.projectionUpdates,
    [projections, windowMs],
    (r) => r.projection,
  );
  const queueFacts: QueueFacts[] = queues.map((q, i) => ({
    ...q,
    depth: depthsAfter[i]?.depth ?? null,
    depthBefore: sampled ? (depthsBefore[i]?.depth ?? null) : null,
    consumers: depthsAfter[i]?.consumers ?? null,
    completedPerSecond: perSecond(recorded.get(q.consumer) ?? 0),
    inboxInWindow: inWindow.get(q.consumer) ?? 0,
    ...(q.projection ? { projectionUpdatesInWindow: updates.get(q.projection) ?? 0 } : {}),
  }));

  const facts: PipelineFacts = {
    windowSeconds: windowMs / 1000,
    sampleSeconds: Math.round(seconds * 10) / 10,
    stallAfterSeconds: stallAfterMs / 1000,
    sources: await checkSources(pool, schema, options.sources, options.sourceLookbackMs),
    outbox,
    cdcSlots: await cdcSlotFacts(pool, options.cdcSlots),
    cdcRetainedWalWarnBytes: options.cdcRetainedWalWarnBytes,
    queues: queueFacts,
    gaps: await gapFacts(pool, schema, stallAfterMs),
    failures: {
      outboxFailed: outbox.failed,
      quarantined: await countRows<{ reason: string }>(pool, sql.openQuarantine, [], (r) => r.reason).then((counts) =>
        Object.fromEntries(counts),
      ),
      effects: await effectFacts(pool, sql, stallAfterMs),
    },
    horizon: { holders: await horizonHolders(pool), warnAfterSeconds: options.horizonWarnAfterMs / 1000 },
    partitions: await partitionFacts(pool, schema),
  };
  const lag = await readLag(pool, schema, windowMs);
  const lagBudgets = judgeLagBudgets(options.lagBudgets, lag, queues);
  const findings = [...diagnose(facts), ...lagBudgetFindings(lagBudgets, facts.windowSeconds)];
  return {
    checkedAt: after.sampledAt.toISOString(),
    windowSeconds: facts.windowSeconds,
    sampleSeconds: facts.sampleSeconds,
    stallAfterSeconds: facts.stallAfterSeconds,
    sources: facts.sources,
    outbox: {
      ...outbox,
      throughput: relayThroughput(outbox),
      failedReasons: outbox.failed > 0 ? await readFailedReasons(pool, schema) : {},
    },
    cdcSlots: facts.cdcSlots,
    queues: queueFacts.map((q) => ({ ...q, throughput: queueThroughput(q, seconds) })),
    gaps: facts.gaps,
    failures: facts.failures,
    horizon: facts.horizon,
    partitions: facts.partitions,
    lag,
    lagBudgets,
    findings,
    stalled: findings.some((f) => f.severity === 'stalled'),
  };
}

async function horizonHolders(pool: pg.Pool): Promise<HorizonHolder[]> {
  const version = await pool.query<{ v: string }>(`SELECT current_setting('server_version_num') AS v`);
  const { rows } = await pool.query<{
    kind: HorizonHolder['kind'];
    holder: string;
    age_seconds: string | null;
    behind: number;
    state: string | null;
  }>(horizonHoldersSql(Number(version.rows[0]!.v) >= 170_000));
  return rows.map((row) => ({
    kind: row.kind,
    holder: row.holder,
    ageSeconds: row.age_seconds === null ? null : Math.max(0, Number(row.age_seconds)),
    transactionsBehind: Number(row.behind),
    state: row.state,
  }));
}

async function cdcSlotFacts(pool: pg.Pool, slots: string[]): Promise<CdcSlotFacts[]> {
  const facts: CdcSlotFacts[] = [];
  for (const slot of slots) {
    const info = await showCdcSlot(pool, slot);
    facts.push({
      slot,
      exists: info !== undefined,
      active: info?.activePid != null,
      retainedWalBytes: info?.retainedWalBytes ?? 0,
      walStatus: info?.walStatus ?? null,
    });
  }
  return facts;
}

async function sampleOutbox(pool: pg.Pool, sql: ReturnType<typeof opsSql>) {
  const { rows } = await pool.query<{
    pending: string;
    failed: string;
    max_position: string;
    oldest_age_seconds: string | null;
    sampled_at: Date;
  }>(sql.outboxSample);
  const row = rows[0]!;
  return {
    pending: Number(row.pending),
    failed: Number(row.failed),
    maxPosition: Number(row.max_position),
    oldestPendingAgeSeconds: row.oldest_age_seconds === null ? null : Number(row.oldest_age_seconds),
    sampledAt: row.sampled_at,
  };
}

/** Ready messages and subscribers per queue; null for a queue the broker does not have or would not show. */
async function queueDepths(
  broker: TransportConnection | undefined,
  queues: string[],
): Promise<({ depth: number; consumers: number } | null)[]> {
  if (!broker) return [];
  const depths: ({ depth: number; consumers: number } | null)[] = [];
  for (const queue of queues) {
    // A refusal (e.g. 403 for a queue this user may not see) is reported as unknown, like a missing queue.
    const counts = await broker.inspectQueue(queue).catch(() => null);
    depths.push(counts && { depth: counts.messages, consumers: counts.consumers });
  }
  return depths;
}

async function countRows<R>(
  pool: pg.Pool,
  text: string,
  params: unknown[],
  key: (row: R) => string,
): Promise<Map<string, number>> {
  const { rows } = await pool.query<R & { n: string }>(text, params);
  return new Map(rows.map((row) => [key(row), Number(row.n)]));
}

/** The business tables and columns are the caller's own identifiers (not converge's schema), quoted per check. */
async function checkSources(
  pool: pg.Pool,
  schema: SchemaRef,
  sources: ResolvedSourceTable[],
  lookbackMs: number,
): Promise<SourceFacts[]> {
  const facts: SourceFacts[] = [];
  for (const source of sources) {
    const text = sourceAheadSql(schema, {
      table: source.table
        .split('.')
        .map((part) => quoteIdentifier(part))
        .join('.'),
      id: quoteIdentifier(source.idColumn),
      version: quoteIdentifier(source.versionColumn),
      ...(source.changedAtColumn ? { changedAt: quoteIdentifier(source.changedAtColumn) } : {}),
    });
    const { rows } = await pool.query<{ id: string }>(text, [source.aggregateType, lookbackMs, SOURCE_LIMIT]);
    facts.push({
      source: source.table,
      aggregateType: source.aggregateType,
      ahead: rows.length,
      sampleIds: rows.slice(0, SAMPLE_IDS).map((r) => r.id),
    });
  }
  return facts;
}

async function effectFacts(pool: pg.Pool, sql: ReturnType<typeof opsSql>, stallAfterMs: number): Promise<EffectFacts> {
  const { rows } = await pool.query<{ failed: string; stale_pending: string; sample_effects: string[] }>(
    sql.effectsNeedingLook,
    [stallAfterMs],
  );
  const row = rows[0];
  return {
    failed: Number(row?.failed ?? 0),
    stalePending: Number(row?.stale_pending ?? 0),
    sampleEffects: row?.sample_effects ?? [],
  };
}

async function gapFacts(pool: pg.Pool, schema: SchemaRef, stallAfterMs: number): Promise<GapFacts> {
  const rows = await readReorderBuffer(pool, schema, stallAfterMs);
  const sample = await readGaps(pool, { schema: schema.name, olderThanMs: stallAfterMs, limit: SAMPLE_IDS });
  const oldest = rows.map((r) => r.oldestAgeSeconds ?? 0);
  return {
    stuckAggregates: rows.reduce((sum, r) => sum + r.gaps, 0),
    parked: rows.reduce((sum, r) => sum + r.parked, 0),
    oldestAgeSeconds: oldest.length > 0 ? Math.max(...oldest) : null,
    sample: sample.map((g) => ({
      consumer: g.consumer,
      aggregateType: g.aggregateType,
      aggregateId: g.aggregateId,
      currentVersion: g.currentVersion,
      parkedVersions: g.parkedVersions,
    })),
  };
}
