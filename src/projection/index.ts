export { applyIncrement, applySnapshot, readProjectionState } from './apply.js';
export type { ApplyResult, ProjectionState, ProjectionTarget, SnapshotTarget } from './apply.js';
export { judgeIncrement } from './versions.js';
export type { IncrementVerdict } from './versions.js';
