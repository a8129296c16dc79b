/**
 * The calendar of a partitioned outbox and inbox, as plain arithmetic: which time range a
 * partition covers, what it is called, which ones must exist ahead of now, and whether an
 * existing set leaves a gap. No I/O; partitioning.ts runs what this decides.
 */

/** The tables converge can keep as time partitions, and the column each is partitioned by. */
export const PARTITIONED_TABLES = { outbox: 'created_at', inbox: 'received_at' } as const;
export type PartitionedTable = keyof typeof PARTITIONED_TABLES;

/** One partition's range, [fromMs, toMs), in ms since the Unix epoch (UTC). */
export interface PartitionRange {
  name: string;
  /** null: the converted table from before partitioning, which starts at MINVALUE. */
  fromMs: number | null;
  toMs: number;
}

/** The start of the interval that holds `atMs`; intervals are aligned to the Unix epoch (UTC). */
export function intervalStart(atMs: number, intervalMs: number): number {
  return Math.floor(atMs / intervalMs) * intervalMs;
}

/** `outbox_p20261207t000000`: the table, then its range's start in UTC, to the second. */
export function partitionName(table: PartitionedTable, fromMs: number): string {
  const stamp = new Date(fromMs).toISOString().replace(/[-:]/g, '').slice(0, 15).toLowerCase();
  return `${table}_p${stamp}`;
}

/**
 * Starts of the partitions that must exist for `now` and the `ahead` intervals after it and are
 * missing from `existing`; a range already covered (by the converted table, say) is not made twice.
 */
export function partitionsToCreate(
  existing: readonly PartitionRange[],
  nowMs: number,
  intervalMs: number,
  ahead: number,
): number[] {
  const first = intervalStart(nowMs, intervalMs);
  const wanted: number[] = [];
  for (let i = 0; i <= ahead; i++) {
    const from = first + i * intervalMs;
    const to = from + intervalMs;
    if (!existing.some((range) => overlaps(range, from, to))) wanted.push(from);
  }
  return wanted;
}

function overlaps(range: PartitionRange, fromMs: number, toMs: number): boolean {
  return (range.fromMs === null || range.fromMs < toMs) && fromMs < range.toMs;
}

/**
 * Until when inserts have a partition without a gap from `now` on, or null when none covers now
 * (an insert fails at once). Ranges are those of one table, in any order.
 */
export function coveredUntil(ranges: readonly PartitionRange[], nowMs: number): number | null {
  const sorted = [...ranges].sort((a, b) => (a.fromMs ?? -Infinity) - (b.fromMs ?? -Infinity));
  let until: number | null = null;
  for (const range of sorted) {
    const reaches = until ?? nowMs;
    if ((range.fromMs ?? -Infinity) <= reaches && range.toMs > reaches) until = range.toMs;
  }
  return until;
}

/** Partitions whose whole range ended at least `retentionMs` before now: the only ones retention may look at. */
export function pastRetention(ranges: readonly PartitionRange[], nowMs: number, retentionMs: number): PartitionRange[] {
  return ranges.filter((range) => range.toMs <= nowMs - retentionMs);
}
