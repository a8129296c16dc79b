/**
 * What the stall diagnosis reads (the facts gathered about each stage) and what it says (its
 * findings), apart from the rules so that every file of rules and the gatherer can import them.
 */

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
  /** Events appended per second during the sample; null when not sampled (sampleMs 0). */
  arrivalPerSecond: number | null;
  /** Events published per second during the sample; null when not sampled. */
  publishedPerSecond: number | null;
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
  /** Inbox rows this consumer recorded during the sample, per second; null when not sampled. */
  completedPerSecond: number | null;
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
  /** Remote side effects (performEffect) that did not complete. */
  effects: EffectFacts;
}

/** Keys of the effects table that are not completed: failed ones wait for a person, stale pending ones have an unknown outcome. */
export interface EffectFacts {
  /** Failed for good (a permanent error): never called again until retryFailedEffect. */
  failed: number;
  /** Pending keys last called longer ago than the stall threshold: a crash between call and record, or retries ran out. */
  stalePending: number;
  /** Effect names with a failed or stale key, at most a few. */
  sampleEffects: string[];
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

/**
 * Something that holds back PostgreSQL's xmin horizon: while it does, vacuum may remove no row version
 * deleted or updated after it began, in any table of the database. The relay's claims and marks and
 * the consumers' inbox and version rows leave such versions behind at the event rate.
 */
export interface HorizonHolder {
  kind: 'transaction' | 'prepared-transaction' | 'replication-slot';
  /** The backend's pid (with its application_name), the prepared transaction's gid or the slot's name. */
  holder: string;
  /** Since when it holds the horizon, in seconds; null for a slot whose server does not say (before PostgreSQL 17). */
  ageSeconds: number | null;
  /** How many transaction ids its xmin lags behind the next one. */
  transactionsBehind: number;
  /** A transaction's state (`idle in transaction`, `active`); a slot's `active` or `inactive`. */
  state: string | null;
}

export interface HorizonFacts {
  /** The oldest holders, at most five, the furthest behind first. */
  holders: HorizonHolder[];
  /** A transaction or an inactive slot holding the horizon this long is a warning. */
  warnAfterSeconds: number;
}

/** A partitioned outbox or inbox: inserts need a partition for now, so how far ahead they reach matters. */
export interface PartitionFacts {
  table: 'outbox' | 'inbox';
  intervalMs: number;
  /** Partitions kept ready after the current one. */
  ahead: number;
  partitions: number;
  /** Where the partitions from now on end without a gap, in ms since the epoch; null: none covers now. */
  coveredUntilMs: number | null;
  /** The database's clock when read. */
  nowMs: number;
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
  horizon: HorizonFacts;
  /** The partitioned tables (none for the plain layout). */
  partitions: PartitionFacts[];
}

export type Stage = 'producer' | 'relay' | 'broker' | 'consumer' | 'projection' | 'ordering' | 'database';

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
    | 'quarantined'
    | 'effects-failed'
    | 'effects-outcome-unknown'
    | 'lag-over-budget'
    | 'vacuum-horizon-held'
    | 'partitions-not-ahead';
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

/** How findings write ages and rates: one decimal below 100, whole numbers from there. */
export function round(n: number): string {
  return n >= 100 ? n.toFixed(0) : n.toFixed(1);
}
