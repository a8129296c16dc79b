/**
 * `converge/ops`: operator tools over durable state (status and stall diagnosis, the outbox's
 * failed rows, the quarantine, retention cleanup, inbox compaction, schema compatibility). The CLI is built on them.
 */
export { readStatus, listOutbox, listOutboxOptions } from './status.js';
export type { ConvergeStatus, OutboxRow } from './status.js';
export { retryFailedEvents } from './retry.js';
export type { RetryFailedResult, RetryRefusedRow } from './retry.js';
export { readPipelineStatus } from './pipeline.js';
export { pipelineStatusOptions } from './pipeline-options.js';
export type {
  PipelineStatus,
  PipelineStatusOptions,
  SourceTable,
  WatchedQueue,
  ConsumerLag,
  LagBudgetFacts,
} from './pipeline.js';
export { diagnose } from './diagnose.js';
export type { Throughput } from './diagnose.js';
export type { Finding, PipelineFacts, Stage } from './facts.js';
export {
  listQuarantine,
  showQuarantined,
  discardQuarantined,
  displayQuarantined,
  quarantineFilterOptions,
} from './dlq.js';
export type {
  QuarantineFilter,
  QuarantineSummary,
  QuarantinedMessage,
  DiscardQuarantinedOptions,
  Masking,
  QuarantineDisplay,
} from './dlq.js';
export { replayQuarantined } from './replay.js';
export type { ReplayQuarantinedOptions, ReplayReceipt } from './replay.js';
export { cleanup, scheduleCleanup, cleanupOptions } from './cleanup.js';
export type { CleanupOptions, CleanupResult, ScheduledCleanupOptions } from './cleanup.js';
// The partitioned layout (migrate's `partitioned`): partitions ahead; cleanup drops the processed ones.
export { createPartitionsAhead, createPartitionsAheadOptions } from './partitions.js';
export type { PartitionRetentionResult, KeptPartition } from './partition-retention.js';
export { compactInbox, compactionOptions } from './compaction.js';
export { boundInboxRetention, DEFAULT_BROKER_MARGIN_MS } from './broker-retention.js';
export type { BrokerCheck, BrokerRetentionOptions } from './broker-retention.js';
export type { CompactionOptions, CompactionResult } from './compaction.js';
export {
  checkCompat,
  findUnreadable,
  judgeCompat,
  countedEntries,
  listRegistry,
  compatOptions,
  unreadableOptions,
} from './compat.js';
export type { CompatVerdict, RegistryEntry, UnreadableGroup, UnreadableReport } from './compat.js';
