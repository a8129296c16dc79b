import type { Executor } from '../db/executor.js';
import type { EventEnvelope } from '../envelope/envelope.js';
import {
  applyIncrement,
  applyIncrements,
  applySnapshot,
  type ApplyResult,
  type BatchApplyResult,
  type BatchTarget,
  type ProjectionTarget,
  type SnapshotTarget,
  type WriteResult,
} from '../projection/index.js';

type Versioned = Pick<EventEnvelope, 'aggregateType' | 'aggregateId' | 'aggregateVersion'>;

/**
 * The projection helpers of a handler's context: already bound to the consumer's transaction and
 * schema, so a projection is versioned where this consumer's inbox row is (the helpers refuse a
 * target naming another schema on a consumer's transaction: projection/guard.ts).
 */
export interface BoundProjection {
  // Properties, not methods: a handler may destructure them (`{ tx, applyIncrement }`); they use no `this`.
  applyIncrement: <E extends Versioned>(
    target: Omit<ProjectionTarget<E>, 'schema'>,
    apply: (event: E) => Promise<WriteResult>,
  ) => Promise<ApplyResult>;
  applyIncrements: <E extends Versioned>(
    target: Omit<BatchTarget<E>, 'schema'>,
    apply: (events: E[]) => Promise<WriteResult>,
  ) => Promise<BatchApplyResult<E>>;
  applySnapshot: <E extends Versioned>(
    target: Omit<SnapshotTarget<E>, 'schema'>,
    apply: (event: E) => Promise<WriteResult>,
  ) => Promise<ApplyResult>;
}

export function bindProjection(tx: Executor): BoundProjection {
  return {
    applyIncrement: (target, apply) => applyIncrement(tx, target, apply),
    applyIncrements: (target, apply) => applyIncrements(tx, target, apply),
    applySnapshot: (target, apply) => applySnapshot(tx, target, apply),
  };
}
