/**
 * The package root: the front door (`createConverge`) and the free functions behind it, for
 * services that write, relay and consume events (README, docs/). Error classes are in
 * `converge-events/errors` (src/errors.ts), operator tools in `converge-events/ops`, prom-client
 * instruments in `converge-events/metrics` (so this entry never loads prom-client), and the unstable
 * pieces of the pipeline in `converge-events/internal`. test/unit/exports.test.ts pins the runtime
 * names of every entry point, each with the page that documents it.
 */

// The front door: one installation, its options given once (docs/front-door.md)
export { createConverge, Converge } from './converge/index.js';
export type {
  ConvergeOptions,
  RelayOwnOptions,
  CdcRelayOwnOptions,
  ConsumerOwnOptions,
  ReconcileOwnOptions,
} from './converge/index.js';

// Events
export type { EventEnvelope, EventKind, NewEvent } from './envelope/envelope.js';
export { defineEvents } from './envelope/events.js';
export type { EventCatalog, EventOf, NewEventOf, DefineEventsOptions } from './envelope/events.js';

// Database seam
export type { Executor, QueryResultLike } from './db/executor.js';
export { withTransaction } from './db/transaction.js';
export { usePreparedStatements, withoutPreparedStatements } from './db/statement.js';

// Schema
export { migrate, migrationSql } from './schema/migrate.js';
export type { MigrateOptions, MigrateResult } from './schema/migrate.js';
export { grantsSql } from './schema/grants.js';
export type { GrantsOptions } from './schema/grants.js';

// Writing events: the outbox
export { appendToOutbox, appendManyToOutbox, updateExactlyOne } from './outbox/append.js';
export type { AppendedEvent, OutboxOptions } from './outbox/append.js';

// Publishing: the relay
export { Relay, startRelay } from './relay/index.js';
export type { RelayOptions, RelayHooks, RelayCycleResult, RelayEvents, RelayRetryInfo } from './relay/index.js';
// Publishing from a logical replication slot instead of polling (docs/relay.md, "CDC relay")
export { CdcRelay, startCdcRelay, createCdcSlot, dropCdcSlot, showCdcSlot } from './relay/index.js';
export type { CdcRelayOptions, CdcRelayEvents, CdcRelayState, SlotInfo as CdcSlotInfo } from './relay/index.js';

// Consuming: the consumer and its topology
export { Consumer, startConsumer, startPartitionedConsumers, readGaps } from './inbox/index.js';
export type {
  ConsumerOptions,
  ConsumerHooks,
  PartitionedConsumerOptions,
  ConsumerEvents,
  ConsumerStats,
  EventHandler,
  EventHandlers,
  BatchHandler,
  HandlerContext,
  BoundProjection,
  Settlement,
  DrainedEvent,
  ReorderBufferLimits,
  Gap,
  GapQuery,
  Upcaster,
  SchemaEvolution,
  QuarantineReason,
  ReplayOutcome,
} from './inbox/index.js';
// Rolling out a schema version: consumers first; the producer's opt-in guard (docs/consumer.md)
export { createCompatGuard } from './ops/compat.js';
export type { CompatGuard, GuardedEvent } from './ops/compat.js';
export { declarePartitionedTopology } from './transport/topology.js';
export type { PartitionedTopology, PartitionedTopologyOptions } from './transport/topology.js';

// Tenants: a relay (and consumer) per schema, one broker connection and one bounded pool (docs/tenants.md)
export { startTenants, Tenants } from './tenants/index.js';
export type { TenantsOptions, TenantRelayOptions, TenantConsumerOptions, TenantState } from './tenants/index.js';

// Transports: RabbitMQ by default; in-process for development and tests, NOT a broker (docs/transports.md)
export { createInProcessTransport } from './transport/in-process.js';
export type { InProcessTransport } from './transport/in-process.js';
export { RabbitMqTransport } from './transport/rabbitmq.js';
export type { RabbitMqTransportOptions } from './transport/rabbitmq.js';
export type {
  Transport,
  TransportConnection,
  TransportPublisher,
  TransportDelivery,
  Subscription,
  SubscribeOptions,
  QueueSet,
  MessageProperties,
  ConnectRequest,
  CarriedHeaders,
  QueueCounts,
  QueueHeadMessage,
} from './transport/transport.js';

// Remote side effects of next-hop events, once in effect (docs/remote-effects.md)
export { idempotencyKey, performEffect, readEffect, retryFailedEffect } from './effects/index.js';
export type { EffectOptions, EffectRef, EffectOutcome, EffectRecord, EffectStatus } from './effects/index.js';

// Versioned projections
export { applyIncrement, applyIncrements, applySnapshot, readProjectionState } from './projection/index.js';
// Freshness: reading your own writes (docs/freshness.md)
export { waitForVersion, readFreshness, readFresh } from './projection/index.js';
export type {
  WaitForVersionOptions,
  WaitResult,
  Freshness,
  FreshnessOptions,
  ReadFreshOptions,
  FreshRead,
  FreshReadReason,
} from './projection/index.js';
export type {
  ApplyResult,
  BatchApplyResult,
  BatchTarget,
  ProjectionState,
  ProjectionTarget,
  SnapshotTarget,
  VersionedEvent,
  WriteResult,
  AffectedRows,
} from './projection/index.js';

// Convergence: reconcile, repair, rebuild
export {
  reconcile,
  rebuildProjection,
  repairFromSnapshot,
  repairGaps,
  sourceSnapshot,
  snapshotPages,
} from './reconcile/index.js';
export type { PagedReader, ReconcileOptions, ReconcileProgress, ReconcileReport } from './reconcile/index.js';
export type { ReconcileRepair, ReconcileRow, Difference, RebuildOptions } from './reconcile/index.js';
export type { GapRepairOptions, GapRepairReport, GapRepairTarget } from './reconcile/index.js';
export type { SourceSnapshot, SourceSnapshotOptions, SnapshotInfo } from './reconcile/index.js';
export type { TrustedSnapshot, RepairResult } from './reconcile/index.js';

// Logging and backoff
export { silentLogger } from './runtime/logger.js';
export type { Logger } from './runtime/logger.js';
export type { BackoffPolicy } from './runtime/backoff.js';
