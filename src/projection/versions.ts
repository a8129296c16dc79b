/**
 * Pure decision for an incremental event that did not land on `version = eventVersion - 1`.
 * Kept free of I/O so the rules can be tested exhaustively.
 */
export type IncrementVerdict =
  /** A trusted snapshot already contains this version: record, ack, no effect. */
  | 'covered-by-baseline'
  /** An earlier version is missing: roll back and wait. */
  | 'gap'
  /** Version already present without a baseline covering it: another event claimed it. */
  | 'stale';

export function judgeIncrement(
  eventVersion: number,
  current: { version: number; baselineVersion: number | null } | null,
): IncrementVerdict {
  if (current === null) return 'gap';
  if (current.baselineVersion !== null && eventVersion <= current.baselineVersion) return 'covered-by-baseline';
  if (eventVersion <= current.version) return 'stale';
  return 'gap';
}

export interface VersionedEvent {
  aggregateType: string;
  aggregateId: string;
  aggregateVersion: number;
}

export interface IncrementPlan<E extends VersionedEvent> {
  /** Events that apply, in version order per aggregate. */
  apply: E[];
  covered: E[];
  /** The first event that cannot apply, and why; the batch must then not be written. */
  blocked?: { event: E; verdict: 'gap' | 'stale'; currentVersion: number };
  /** Each touched aggregate's version after applying, keyed by aggregateKey(). */
  finalVersions: Map<string, number>;
}

export function aggregateKey(event: Pick<VersionedEvent, 'aggregateType' | 'aggregateId'>): string {
  return `${event.aggregateType}\u0000${event.aggregateId}`;
}

/**
 * Plans a batch of incremental events against the current state of their aggregates: each
 * event must sit exactly on the version before it (counting the ones applied earlier in the
 * same batch), or be covered by the baseline. Pure, so the chain rules are unit-tested.
 */
export function planIncrements<E extends VersionedEvent>(
  events: readonly E[],
  current: ReadonlyMap<string, { version: number; baselineVersion: number | null }>,
): IncrementPlan<E> {
  const plan: IncrementPlan<E> = { apply: [], covered: [], finalVersions: new Map() };
  const ordered = [...events].sort((a, b) => {
    const ka = aggregateKey(a);
    const kb = aggregateKey(b);
    return ka < kb ? -1 : ka > kb ? 1 : a.aggregateVersion - b.aggregateVersion;
  });
  for (const event of ordered) {
    const key = aggregateKey(event);
    const state = current.get(key) ?? null;
    const version = plan.finalVersions.get(key) ?? state?.version ?? 0;
    if (event.aggregateVersion === version + 1) {
      plan.apply.push(event);
      plan.finalVersions.set(key, event.aggregateVersion);
      continue;
    }
    const verdict = judgeIncrement(event.aggregateVersion, {
      version,
      baselineVersion: state?.baselineVersion ?? null,
    });
    if (verdict === 'covered-by-baseline') plan.covered.push(event);
    else {
      plan.blocked ??= { event, verdict, currentVersion: version };
    }
  }
  return plan;
}

/** One aggregate's events in a batch, when they form an unbroken chain of versions. */
export interface VersionRun<E extends VersionedEvent> {
  aggregateType: string;
  aggregateId: string;
  first: number;
  last: number;
  /** In version order. */
  events: E[];
}

/**
 * Splits a batch into one run per aggregate if every aggregate's versions are consecutive
 * (3, 4, 5); null if any aggregate has a hole or a repeated version inside the batch, which
 * only the full plan can judge. Runs come sorted by aggregate, the order rows get locked in.
 */
export function consecutiveRuns<E extends VersionedEvent>(events: readonly E[]): VersionRun<E>[] | null {
  const byAggregate = new Map<string, E[]>();
  for (const event of events) {
    const key = aggregateKey(event);
    const list = byAggregate.get(key);
    if (list) list.push(event);
    else byAggregate.set(key, [event]);
  }
  const runs: VersionRun<E>[] = [];
  for (const key of [...byAggregate.keys()].sort()) {
    const list = byAggregate.get(key)!.sort((a, b) => a.aggregateVersion - b.aggregateVersion);
    for (let i = 1; i < list.length; i++)
      if (list[i]!.aggregateVersion !== list[i - 1]!.aggregateVersion + 1) return null;
    const head = list[0]!;
    runs.push({
      aggregateType: head.aggregateType,
      aggregateId: head.aggregateId,
      first: head.aggregateVersion,
      last: list[list.length - 1]!.aggregateVersion,
      events: list,
    });
  }
  return runs;
}
