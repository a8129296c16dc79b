/**
 * `converge/ops`: operator tools over durable state (status and stall diagnosis, the outbox's
 * failed rows, the quarantine, retention cleanup, inbox compaction). The CLI is built on them.
 */
export { readStatus, retryFailedEvents, listOutbox } from './status.js';
export type { ConvergeStatus, OutboxRow } from './status.js';
export { readPipelineStatus } from './pipeline.js';
export type { PipelineStatus, PipelineStatusOptions, SourceTable, WatchedQueue, ConsumerLag } from './pipeline.js';
export { diagnose } from './diagnose.js';
export type { Finding, Throughput, PipelineFacts, Stage } from './diagnose.js';
export { listQuarantine, showQuarantined, replayQuarantined, discardQuarantined } from './dlq.js';
export type { QuarantineFilter, QuarantineSummary, QuarantinedMessage } from './dlq.js';
export { cleanup, scheduleCleanup } from './cleanup.js';
export type { CleanupOptions, CleanupResult, ScheduledCleanupOptions } from './cleanup.js';
export { compactInbox } from './compaction.js';
export type { CompactionOptions, CompactionResult } from './compaction.js';
