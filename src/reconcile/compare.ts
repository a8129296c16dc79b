import { isDeepStrictEqual } from 'node:util';

/** One aggregate as a paged reader returns it: the source of truth, or the projection. */
export interface ReconcileRow {
  id: string;
  version: number;
  /** Explicitly deleted (a tombstone); absence from a page never means deleted. */
  deleted?: boolean;
  /** Key fields to compare at equal versions; omitted fields are not compared. */
  fields?: Record<string, unknown>;
}

export type Difference =
  /** In the source, not in the projection. */
  | 'missing'
  /** The projection is at an older version than the source. */
  | 'stale'
  /** The projection is at a newer version than the source (a lagging source read, or a bug): never repaired. */
  | 'ahead'
  /** Same version, different fields or deleted flag: the projection was edited or written wrong. */
  | 'mismatch'
  /** In the projection, not in the source: reported, never deleted on that ground alone. */
  | 'extra';

export const DIFFERENCES: readonly Difference[] = ['missing', 'stale', 'ahead', 'mismatch', 'extra'];

/** Orders ids as PostgreSQL does under `COLLATE "C"`: by their UTF-8 bytes. */
export function compareIds(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

/** The difference between the source's and the projection's view of one id, or null if they agree. */
export function classify(source: ReconcileRow | undefined, target: ReconcileRow | undefined): Difference | null {
  if (!source && !target) return null;
  if (!target) return source!.deleted ? null : 'missing';
  if (!source) return target.deleted ? null : 'extra';
  if (target.version < source.version) return 'stale';
  if (target.version > source.version) return 'ahead';
  if ((source.deleted ?? false) !== (target.deleted ?? false)) return 'mismatch';
  return fieldsDiffer(source.fields, target.fields) ? 'mismatch' : null;
}

/** Compares the fields both sides report; a field only one side has is not compared. */
function fieldsDiffer(
  source: Record<string, unknown> | undefined,
  target: Record<string, unknown> | undefined,
): boolean {
  if (!source || !target) return false;
  for (const key of Object.keys(source)) {
    if (key in target && !isDeepStrictEqual(normalize(source[key]), normalize(target[key]))) return true;
  }
  return false;
}

/** Numbers may come back from PostgreSQL as strings (bigint, numeric): compare them as text. */
function normalize(value: unknown): unknown {
  if (typeof value === 'number' || typeof value === 'bigint') return String(value);
  if (value instanceof Date) return value.toISOString();
  return value;
}

/**
 * Walks two pages sorted by id (byte order) together, as a merge join. Returns the pairs of
 * rows whose ids are settled: an id is settled once both pages have moved past it, or a
 * page is the last one of its side. `rest` holds rows that must wait for the next page.
 */
export function mergePages(
  source: ReconcileRow[],
  target: ReconcileRow[],
  sourceDone: boolean,
  targetDone: boolean,
): {
  pairs: [ReconcileRow | undefined, ReconcileRow | undefined][];
  sourceRest: ReconcileRow[];
  targetRest: ReconcileRow[];
} {
  const pairs: [ReconcileRow | undefined, ReconcileRow | undefined][] = [];
  let i = 0;
  let j = 0;
  // A side with more pages bounds what is settled by its last id; a finished side bounds nothing.
  const bounds: (string | undefined)[] = [];
  if (!sourceDone) bounds.push(source[source.length - 1]?.id);
  if (!targetDone) bounds.push(target[target.length - 1]?.id);
  // An unfinished side with no rows in hand says nothing yet about any id.
  if (bounds.includes(undefined)) return { pairs, sourceRest: source, targetRest: target };
  const limit = (bounds as string[]).sort(compareIds)[0];
  const within = (id: string) => limit === undefined || compareIds(id, limit) <= 0;
  while (i < source.length || j < target.length) {
    const s = source[i];
    const t = target[j];
    const order = s && t ? compareIds(s.id, t.id) : s ? -1 : 1;
    const id = order <= 0 ? s!.id : t!.id;
    if (!within(id)) break;
    if (order === 0) {
      pairs.push([s, t]);
      i++;
      j++;
    } else if (order < 0) {
      pairs.push([s, undefined]);
      i++;
    } else {
      pairs.push([undefined, t]);
      j++;
    }
  }
  return { pairs, sourceRest: source.slice(i), targetRest: target.slice(j) };
}
