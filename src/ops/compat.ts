import { z } from 'zod';
import { inboxScopeOption } from '../runtime/option-fields.js';
import type { Executor } from '../db/executor.js';
import { schemaRef } from '../runtime/identifier.js';
import { defineOptions, schemaOption } from '../runtime/options.js';

import { IncompatibleSchemaVersionError } from '../runtime/errors.js';
import {
  acceptsVersion,
  formatAccepts,
  parseAccepts,
  REGISTRY_LOST_AFTER_MS,
  type AcceptedVersions,
} from '../inbox/index.js';
import { compatSql } from './sql.js';

/**
 * A consumer with no running instance still counts while its newest registry row was refreshed
 * within this window: its queue collects events meanwhile, and its code reads them when it is back
 * (a deploy, a night's outage). Past it, the consumer is taken as gone for good.
 */
export const DEFAULT_LIVE_WITHIN_MS = 24 * 3_600_000;

/** How long the producer guard reuses one read of the registry. */
export const DEFAULT_COMPAT_CACHE_TTL_MS = 30_000;

const liveWithinOption = z
  .number()
  .int()
  .min(1)
  .default(DEFAULT_LIVE_WITHIN_MS)
  .describe(
    'A consumer is live while its registry row was refreshed within this many ms (running ones: every minute).',
  );

export const registryOptions = defineOptions(
  'listRegistry',
  z.strictObject({ schema: schemaOption, liveWithinMs: liveWithinOption }),
);

export const compatOptions = defineOptions(
  'checkCompat',
  z.strictObject({
    schema: schemaOption,
    eventType: z.string().min(1).describe('The event type a producer is about to write.'),
    schemaVersion: z.number().int().min(1).describe('The schema version it is about to write.'),
    liveWithinMs: liveWithinOption,
  }),
);

export const compatGuardOptions = defineOptions(
  'createCompatGuard',
  z.strictObject({
    schema: schemaOption,
    liveWithinMs: liveWithinOption,
    cacheTtlMs: z
      .number()
      .int()
      .min(0)
      .default(DEFAULT_COMPAT_CACHE_TTL_MS)
      .describe(
        'How long one read of the registry is reused, in ms; 0 reads it on every check. A consumer rolled out meanwhile is seen after this.',
      ),
  }),
);

export const unreadableOptions = defineOptions(
  'findUnreadable',
  z.strictObject({
    schema: schemaOption,
    accepts: z
      .string()
      .min(1)
      .describe(
        "What the older code reads, as `converge compat` lists it: 'OrderPaid:1-2,OrderShipped:1' (',*' when a '*' handler or batchHandler takes any other type).",
      ),
    consumer: inboxScopeOption.describe(
      'Its consumer name (inbox scope): whose in-flight events and quarantine count.',
    ),
    sample: z.number().int().min(0).max(100).default(5).describe('Ids listed per event type and version.'),
  }),
);

/** One row of the schema registry: a consumer instance, what its code reads, when it was last seen. */
export interface RegistryEntry {
  consumer: string;
  /** `host:pid:random`, one per Consumer object. */
  instance: string;
  queue: string | null;
  /** Accepted versions as formatAccepts writes them; give an older one to `findUnreadable` before a rollback. */
  accepts: string;
  startedAt: Date;
  lastSeenAt: Date;
  stoppedAt: Date | null;
  /** Not stopped and refreshed within the last few heartbeats. */
  running: boolean;
  /** Refreshed within the live window. */
  live: boolean;
}

/** The registry, each consumer's newest row first. */
export async function listRegistry(
  executor: Executor,
  input: z.input<typeof registryOptions.schema> = {},
): Promise<RegistryEntry[]> {
  const options = registryOptions.parse(input);
  const { rows } = await executor.query<Record<string, unknown>>(compatSql(schemaRef(options.schema)).registry, [
    options.liveWithinMs,
    REGISTRY_LOST_AFTER_MS,
  ]);
  return rows.map((row) => ({
    consumer: row.consumer as string,
    instance: row.instance as string,
    queue: (row.queue as string | null) ?? null,
    accepts: row.accepts as string,
    startedAt: row.started_at as Date,
    lastSeenAt: row.last_seen_at as Date,
    stoppedAt: (row.stopped_at as Date | null) ?? null,
    running: row.running as boolean,
    live: row.live as boolean,
  }));
}

/**
 * The rows that speak for each consumer: its running instances (all of them: during a rolling
 * deploy old and new code both run); with none running, its newest row if it is live (the code
 * that reads the queue when the consumer is back). `stale`: consumers with neither.
 */
export function countedEntries(entries: readonly RegistryEntry[]): {
  counted: RegistryEntry[];
  stale: RegistryEntry[];
} {
  const byConsumer = new Map<string, RegistryEntry[]>();
  for (const entry of entries) byConsumer.set(entry.consumer, [...(byConsumer.get(entry.consumer) ?? []), entry]);
  const counted: RegistryEntry[] = [];
  const stale: RegistryEntry[] = [];
  for (const rows of byConsumer.values()) {
    const running = rows.filter((row) => row.running);
    const newest = rows.reduce((a, b) => (b.lastSeenAt > a.lastSeenAt ? b : a));
    if (running.length > 0) counted.push(...running);
    else if (newest.live) counted.push(newest);
    else stale.push(newest);
  }
  return { counted, stale };
}

export interface CompatVerdict {
  eventType: string;
  schemaVersion: number;
  /** True when no counted consumer of the type is left out (also when none reads the type at all). */
  compatible: boolean;
  /** Counted rows (see countedEntries) of consumers that read the type, each saying whether they read this version. */
  consumers: (Pick<RegistryEntry, 'consumer' | 'instance' | 'accepts' | 'lastSeenAt' | 'running'> & {
    reads: boolean;
  })[];
  /** Consumers of the type not seen within the live window: not counted. */
  stale: Pick<RegistryEntry, 'consumer' | 'accepts' | 'lastSeenAt'>[];
}

/** The verdict over registry rows, without I/O: what checkCompat and the guard decide with. */
export function judgeCompat(
  entries: readonly RegistryEntry[],
  eventType: string,
  schemaVersion: number,
): CompatVerdict {
  const verdict: CompatVerdict = { eventType, schemaVersion, compatible: true, consumers: [], stale: [] };
  const { counted, stale } = countedEntries(entries);
  for (const entry of counted) {
    const answer = acceptsVersion(parseAccepts(entry.accepts), eventType, schemaVersion);
    if (answer === 'not-consumer') continue;
    const { consumer, instance, accepts, lastSeenAt, running } = entry;
    verdict.consumers.push({ consumer, instance, accepts, lastSeenAt, running, reads: answer === 'yes' });
    if (answer === 'no') verdict.compatible = false;
  }
  for (const { consumer, accepts, lastSeenAt } of stale)
    if (acceptsVersion(parseAccepts(accepts), eventType, schemaVersion) !== 'not-consumer')
      verdict.stale.push({ consumer, accepts, lastSeenAt });
  return verdict;
}

/**
 * Whether every live consumer of `eventType` reads `schemaVersion`: the article's rule that
 * consumers roll out first, checked against what consumers registered when they subscribed.
 */
export async function checkCompat(
  executor: Executor,
  input: z.input<typeof compatOptions.schema>,
): Promise<CompatVerdict> {
  const { schema, eventType, schemaVersion, liveWithinMs } = compatOptions.parse(input);
  return judgeCompat(await listRegistry(executor, { schema, liveWithinMs }), eventType, schemaVersion);
}

/** The opt-in producer guard: call `check` in the business transaction before appending. */
export interface CompatGuard {
  /**
   * Throws IncompatibleSchemaVersionError (CONVERGE_INCOMPATIBLE_SCHEMA_VERSION), naming the
   * consumers, if a live consumer does not read an event's `schemaVersion` (1 when not given).
   */
  check(executor: Executor, events: GuardedEvent | readonly GuardedEvent[]): Promise<void>;
}

/** What the guard looks at: a NewEvent fits. */
export interface GuardedEvent {
  eventType: string;
  schemaVersion?: number;
}

/**
 * A guard that refuses event versions some live consumer cannot read. The registry is read on
 * the executor given to `check` (so the producer role needs SELECT on it, `grantsSql` grants it)
 * at most once per `cacheTtlMs`; between reads a check costs no statement.
 */
export function createCompatGuard(input: z.input<typeof compatGuardOptions.schema> = {}): CompatGuard {
  const { schema, liveWithinMs, cacheTtlMs } = compatGuardOptions.parse(input);
  let cached: { at: number; entries: RegistryEntry[] } | undefined;
  const registry = async (executor: Executor) => {
    if (cached && Date.now() - cached.at < cacheTtlMs) return cached.entries;
    cached = { at: Date.now(), entries: await listRegistry(executor, { schema, liveWithinMs }) };
    return cached.entries;
  };
  return {
    async check(executor, events) {
      const entries = await registry(executor);
      for (const event of (Array.isArray(events) ? events : [events]) as readonly GuardedEvent[]) {
        const verdict = judgeCompat(entries, event.eventType, event.schemaVersion ?? 1);
        if (!verdict.compatible)
          throw new IncompatibleSchemaVersionError(verdict.eventType, verdict.schemaVersion, [
            ...new Set(verdict.consumers.filter((c) => !c.reads).map((c) => c.consumer)),
          ]);
      }
    },
  };
}

/** Events of one type and version the older code cannot read, counted where they wait. */
export interface UnreadableGroup {
  eventType: string;
  schemaVersion: number;
  count: number;
  /** A few of them, oldest first: eventIds (outbox, in flight) or quarantine ids (for `converge dlq`). */
  ids: string[];
}

export interface UnreadableReport {
  consumer: string;
  /** The accepted versions checked against, in canonical form. */
  accepts: string;
  /** Not yet published (pending or failed): the relay will still send them. */
  outbox: UnreadableGroup[];
  /**
   * Published but not in the consumer's inbox (nor compacted, nor quarantined or discarded): in
   * its queues, or parked. Derived from the outbox and the inbox, not read from the broker, so
   * published rows removed by cleanup, or events routed to other queues only, are not seen.
   */
  inFlight: UnreadableGroup[];
  /** Open quarantine rows of this consumer. */
  quarantine: UnreadableGroup[];
  total: number;
}

const PLACES = { outbox: 'outbox', 'in-flight': 'inFlight', quarantine: 'quarantine' } as const;

/**
 * Before rolling a consumer back: the events waiting for it whose versions the older code does
 * not read (`accepts`, e.g. an older registry entry of the same consumer). Counts and ids, never payloads.
 */
export async function findUnreadable(
  executor: Executor,
  input: z.input<typeof unreadableOptions.schema>,
): Promise<UnreadableReport> {
  const options = unreadableOptions.parse(input);
  const accepted = parseAccepts(options.accepts);
  const ranges = acceptedRanges(accepted);
  const { rows } = await executor.query<{
    place: keyof typeof PLACES;
    event_type: string;
    schema_version: number;
    n: string;
    sample: string[];
  }>(compatSql(schemaRef(options.schema)).unreadable, [
    ranges.map((r) => r.eventType),
    ranges.map((r) => r.min),
    ranges.map((r) => r.max),
    options.consumer,
    options.sample,
  ]);
  const report: UnreadableReport = {
    consumer: options.consumer,
    accepts: formatAccepts(accepted),
    outbox: [],
    inFlight: [],
    quarantine: [],
    total: 0,
  };
  for (const row of rows) {
    const count = Number(row.n);
    report[PLACES[row.place]].push({
      eventType: row.event_type,
      schemaVersion: row.schema_version,
      count,
      ids: row.sample.filter((id) => id !== null),
    });
    report.total += count;
  }
  return report;
}

/** One row per type and range; types only `*` covers are never unreadable, so they are left out. */
function acceptedRanges(accepted: AcceptedVersions): { eventType: string; min: number; max: number }[] {
  return Object.entries(accepted.types).flatMap(([eventType, ranges]) => ranges.map((r) => ({ eventType, ...r })));
}
