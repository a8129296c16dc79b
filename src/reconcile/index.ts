export { repairFromSnapshot } from './repair.js';
export type { TrustedSnapshot, RepairResult } from './repair.js';
export { reconcile, reconcileOptions } from './reconcile.js';
export type {
  PagedReader,
  ReconcileOptions,
  ReconcileProgress,
  ReconcileReport,
  ReconcileRepair,
} from './reconcile.js';
export { classify, compareIds, DIFFERENCES } from './compare.js';
export type { Difference, ReconcileRow } from './compare.js';
export { rebuildProjection, rebuildOptions } from './rebuild.js';
export type { RebuildOptions } from './rebuild.js';
export { repairGaps, gapRepairOptions } from './gap-repair.js';
export type { GapRepairOptions, GapRepairReport, GapRepairTarget, SourceSnapshot } from './gap-repair.js';
export { sourceSnapshot, sourceSnapshotOptions, snapshotPages } from './consistent-read.js';
export type { SnapshotInfo, SourceSnapshotOptions } from './consistent-read.js';
