export { applyIncrement, applyIncrements, applySnapshot, readProjectionState, readState } from './apply.js';
export type {
  ApplyResult,
  BatchApplyResult,
  BatchTarget,
  ProjectionState,
  ProjectionTarget,
  SnapshotTarget,
} from './apply.js';
export type { AffectedRows, WriteResult } from './write.js';
export { aggregateKey, judgeIncrement, planIncrements } from './versions.js';
export type { IncrementPlan, IncrementVerdict, VersionedEvent } from './versions.js';
export { watchVersions, reportBlocked } from './guard.js';
export type { BlockedVerdict, VersionWatch } from './guard.js';
export { waitForVersion, readFreshness, readFresh } from './freshness.js';
export type {
  WaitForVersionOptions,
  WaitResult,
  Freshness,
  FreshnessOptions,
  ReadFreshOptions,
  FreshRead,
  FreshReadReason,
} from './freshness.js';
