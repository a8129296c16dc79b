/** The seeded side of the chaos run: the same seed gives the same faults in the same order. */

export type FaultKind =
  | 'kill-relay'
  | 'kill-consumer'
  | 'relay-dies-after-confirm'
  | 'consumer-dies-after-commit'
  | 'close-amqp-connections'
  | 'restart-broker'
  | 'terminate-backends'
  | 'hold-hot-row-lock'
  | 'duplicate-storm'
  | 'slow-consumer'
  | 'bad-message'
  // --cluster only (chaos/cluster-faults.ts): a node taken away and restarted.
  | 'stop-leader-node'
  | 'stop-minority-node'
  | 'kill-node'
  // --pg embedded only (chaos/pg-faults.ts): the run's own PostgreSQL restarted.
  | 'pg-restart-fast'
  | 'pg-restart-immediate'
  // --pg pooler only (chaos/pooler-faults.ts): the run's own PgBouncer killed and started again.
  | 'restart-pooler'
  // --pg failover only (chaos/failover-faults.ts): the pair's primary crashed, its standby promoted; once per run.
  | 'pg-failover';

/** Relative frequency of each fault. A broker restart is the slowest, so it is the rarest; node faults only run with --cluster. */
export const FAULT_WEIGHTS: Record<FaultKind, number> = {
  'kill-relay': 2,
  'kill-consumer': 2,
  'relay-dies-after-confirm': 2,
  'consumer-dies-after-commit': 2,
  'close-amqp-connections': 1,
  'restart-broker': 1,
  'terminate-backends': 1,
  'hold-hot-row-lock': 1,
  'duplicate-storm': 1,
  'slow-consumer': 1,
  'bad-message': 1,
  'stop-leader-node': 2,
  'stop-minority-node': 2,
  'kill-node': 2,
  // Only with --pg embedded (chaos/pg-faults.ts): the shared server is never restarted.
  'pg-restart-fast': 1,
  'pg-restart-immediate': 1,
  // Only with --pg pooler (chaos/pooler-faults.ts). Twice as often as one PG restart: it is what that mode is for.
  'restart-pooler': 2,
  // Only with --pg failover (chaos/failover-faults.ts), and at most once per run (ONCE_PER_RUN).
  'pg-failover': 1,
};

export const FAULT_KINDS = Object.keys(FAULT_WEIGHTS) as FaultKind[];

/**
 * Faults a run can inject only once: a failover promotes the one standby the pair has, and nothing
 * makes the crashed primary a standby again, so a second one would have no server to fail over to.
 */
export const ONCE_PER_RUN: ReadonlySet<FaultKind> = new Set<FaultKind>(['pg-failover']);

/**
 * Faults drawn from a shuffled bag holding each kind `weight` times, refilled when empty: a
 * run of one bag's length meets every kind, in an order only the seed decides. `deferred`
 * kinds (e.g. a broker restart shortly after the last one) stay in the bag for later. A kind in
 * `once` leaves the bag for good when drawn (its other copies too, and it is not put back at a
 * refill); undefined once every kind is spent, so a run of only such kinds goes on without faults.
 */
export function faultBag(
  random: () => number,
  kinds: readonly FaultKind[] = FAULT_KINDS,
  once: ReadonlySet<FaultKind> = ONCE_PER_RUN,
): (deferred?: ReadonlySet<FaultKind>) => FaultKind | undefined {
  let bag: FaultKind[] = [];
  let live = [...kinds];
  return (deferred = new Set()) => {
    if (live.length === 0) return undefined;
    if (bag.length === 0)
      bag = shuffle(
        live.flatMap((kind) => Array<FaultKind>(FAULT_WEIGHTS[kind]).fill(kind)),
        random,
      );
    const index = bag.findIndex((kind) => !deferred.has(kind));
    const kind = index < 0 ? pickFault(random, deferred, live) : bag.splice(index, 1)[0]!;
    if (once.has(kind)) {
      live = live.filter((k) => k !== kind);
      bag = bag.filter((k) => k !== kind);
    }
    return kind;
  };
}

/** --every-kind's end: each of the run's kinds drawn at least once (a once-per-run kind needs no more than that). */
export function everyKindRan(
  kinds: readonly FaultKind[],
  counts: Readonly<Partial<Record<FaultKind, number>>>,
): boolean {
  return kinds.every((kind) => (counts[kind] ?? 0) > 0);
}

function shuffle<T>(items: T[], random: () => number): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [items[i], items[j]] = [items[j]!, items[i]!];
  }
  return items;
}

/** mulberry32: small, fast, and good enough to spread faults; not for anything secret. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A weighted draw among `kinds` (a run's kinds: never a cluster, PG or pooler fault the run cannot inject) minus `excluded`. */
export function pickFault(
  random: () => number,
  excluded: ReadonlySet<FaultKind> = new Set(),
  kinds: readonly FaultKind[] = FAULT_KINDS,
): FaultKind {
  const allowed = kinds.filter((kind) => !excluded.has(kind));
  const entries = (allowed.length > 0 ? allowed : kinds).map((kind) => [kind, FAULT_WEIGHTS[kind]] as const);
  const total = entries.reduce((sum, [, weight]) => sum + weight, 0);
  let roll = random() * total;
  for (const [kind, weight] of entries) {
    roll -= weight;
    if (roll < 0) return kind;
  }
  return entries[entries.length - 1]![0];
}

/** A whole number in [min, max]. */
export function between(random: () => number, min: number, max: number): number {
  return min + Math.floor(random() * (max - min + 1));
}
