export type { EventEnvelope, EventKind, NewEvent } from './envelope/envelope.js';
export { fingerprint, canonicalJson } from './envelope/fingerprint.js';
export { validateEnvelope, parseEnvelope, DEFAULT_MAX_ENVELOPE_BYTES, MAX_JSON_DEPTH } from './envelope/validate.js';
export { encodeMessage, routingKeyFromTemplate, DEFAULT_ROUTING_KEY, HEADER, CONTENT_TYPE } from './transport/wire.js';
export type { EncodedMessage, RoutingKeyFn } from './transport/wire.js';
export { declarePartitionedTopology } from './transport/topology.js';
export type { PartitionedTopology, PartitionedTopologyOptions } from './transport/topology.js';

export type { Executor, QueryResultLike } from './db/executor.js';
export { quoteIdentifier } from './runtime/identifier.js';
export { withTransaction } from './db/transaction.js';
export { usePreparedStatements } from './db/statement.js';

export { migrate, migrationSql } from './schema/migrate.js';
export { DEFAULT_SCHEMA } from './runtime/defaults.js';
export type { MigrateOptions, MigrateResult } from './schema/migrate.js';
export { grantsSql } from './schema/grants.js';
export type { GrantsOptions } from './schema/grants.js';

export { appendToOutbox, appendManyToOutbox, updateExactlyOne } from './outbox/append.js';
export type { AppendedEvent, OutboxOptions } from './outbox/append.js';

export { Relay, startRelay, outboxRowToEnvelope } from './relay/index.js';
export type { RelayOptions, RelayHooks, RelayCycleResult, RelayEvents, OutboxEnvelopeRow } from './relay/index.js';

export { Consumer, startConsumer, startPartitionedConsumers, DeliveryProcessor, decideFailure, ATTEMPT_HEADER, REPLAY_OF_HEADER, DEFAULT_REORDER_BUFFER, readGaps, upcast, DEFAULT_RAMP_UP, rampLimit } from './inbox/index.js';
export type {
  ConsumerOptions,
  ConsumerHooks,
  PartitionedConsumerOptions,
  ConsumerEvents,
  ConsumerStats,
  ProcessorOptions,
  EventHandler,
  BatchHandler,
  HandlerContext,
  Settlement,
  DrainedEvent,
  DrainSink,
  ReorderBufferLimits,
  Gap,
  GapQuery,
  Upcaster,
  SchemaEvolution,
  FailureDecision,
  FailureContext,
  QuarantineReason,
  RawDelivery,
  ReplayOutcome,
} from './inbox/index.js';

export { applyIncrement, applyIncrements, applySnapshot, readProjectionState, judgeIncrement, planIncrements } from './projection/index.js';
export type {
  ApplyResult,
  BatchApplyResult,
  BatchTarget,
  ProjectionState,
  ProjectionTarget,
  SnapshotTarget,
  IncrementPlan,
  IncrementVerdict,
  VersionedEvent,
} from './projection/index.js';

export { repairFromSnapshot, repairGaps, reconcile, rebuildProjection, classify as classifyDifference, compareIds } from './reconcile/index.js';
export type { SourceSnapshot, GapRepairOptions, GapRepairReport, GapRepairTarget, TrustedSnapshot, RepairResult, PagedReader, ReconcileOptions, ReconcileProgress, ReconcileReport, ReconcileRepair, Difference, ReconcileRow, RebuildOptions } from './reconcile/index.js';

export { readStatus, retryFailedEvents, listOutbox } from './ops/status.js';
export type { ConvergeStatus, OutboxRow } from './ops/status.js';

export { readPipelineStatus } from './ops/pipeline.js';
export type { PipelineStatus, PipelineStatusOptions, SourceTable, WatchedQueue, ConsumerLag } from './ops/pipeline.js';
export { diagnose, drainEstimate } from './ops/diagnose.js';
export type { Finding, Throughput, PipelineFacts } from './ops/diagnose.js';
export { listQuarantine, showQuarantined, replayQuarantined, discardQuarantined } from './ops/dlq.js';
export type { QuarantineFilter, QuarantineSummary, QuarantinedMessage } from './ops/dlq.js';
export { cleanup, scheduleCleanup, validateRetention } from './ops/cleanup.js';
export type { CleanupOptions, CleanupResult } from './ops/cleanup.js';
export { compactInbox } from './ops/compaction.js';
export type { CompactionOptions, CompactionResult } from './ops/compaction.js';
export { registerConvergenceMetrics, serveMetrics, instrumentRelay, instrumentConsumer, serveRelayMetrics, serveConsumerMetrics } from './metrics/metrics.js';
export type { ConvergenceMetricsOptions, MetricsEndpoint, ServedMetrics } from './metrics/metrics.js';
export { backoffDelay, DEFAULT_BACKOFF } from './runtime/backoff.js';
export type { BackoffPolicy } from './runtime/backoff.js';
export { createLogger, silentLogger } from './runtime/logger.js';
export type { Logger } from './runtime/logger.js';

export {
  ConvergeError,
  ConfigError,
  InvalidIdentifierError,
  EnvelopeValidationError,
  MalformedBodyError,
  BodyTooLargeError,
  ConcurrencyConflictError,
  ContentConflictError,
  VersionGapError,
  StaleVersionError,
  PublishError,
  SchemaTooNewError,
  PermanentError,
  TransientError,
  UnsupportedSchemaVersionError,
} from './runtime/errors.js';
export type { AggregateKey, PublishFailure } from './runtime/errors.js';
