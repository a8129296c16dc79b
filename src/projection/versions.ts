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

export function judgeIncrement(eventVersion: number, current: { version: number; baselineVersion: number | null } | null): IncrementVerdict {
  if (current === null) return 'gap';
  if (current.baselineVersion !== null && eventVersion <= current.baselineVersion) return 'covered-by-baseline';
  if (eventVersion <= current.version) return 'stale';
  return 'gap';
}
