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
  | 'restart-pooler';

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
};

export const FAULT_KINDS = Object.keys(FAULT_WEIGHTS) as FaultKind[];

/**
 * Faults drawn from a shuffled bag holding each kind `weight` times, refilled when empty: a
 * run of one bag's length meets every kind, in an order only the seed decides. `deferred`
 * kinds (e.g. a broker restart shortly after the last one) stay in the bag for later.
 */
export function faultBag(
  random: () => number,
  kinds: readonly FaultKind[] = FAULT_KINDS,
): (deferred?: ReadonlySet<FaultKind>) => FaultKind {
  let bag: FaultKind[] = [];
  return (deferred = new Set()) => {
    if (bag.length === 0)
      bag = shuffle(
        kinds.flatMap((kind) => Array<FaultKind>(FAULT_WEIGHTS[kind]).fill(kind)),
        random,
      );
    const index = bag.findIndex((kind) => !deferred.has(kind));
    if (index < 0) return pickFault(random, deferred, kinds);
    return bag.splice(index, 1)[0]!;
  };
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
