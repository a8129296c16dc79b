export { repairFromSnapshot } from './repair.js';
export type { TrustedSnapshot, RepairResult } from './repair.js';
export { reconcile } from './reconcile.js';
export type {
  PagedReader,
  ReconcileOptions,
  ReconcileProgress,
  ReconcileReport,
  ReconcileRepair,
} from './reconcile.js';
export { classify, compareIds, DIFFERENCES } from './compare.js';
export type { Difference, ReconcileRow } from './compare.js';
export { rebuildProjection } from './rebuild.js';
export type { RebuildOptions } from './rebuild.js';
export { repairGaps } from './gap-repair.js';
export type { GapRepairOptions, GapRepairReport, GapRepairTarget, SourceSnapshot } from './gap-repair.js';
