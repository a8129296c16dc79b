/**
 * Renders docs/reference/options.md from the components' option schemas: one table per
 * component (option, type, default, description). `--check` compares instead of writing and
 * exits 1 naming the file when the committed copy is out of date.
 */
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import type { OptionsSpec } from '../../src/runtime/options.js';
import { relayOptions } from '../../src/relay/options.js';
import { convergeOptions } from '../../src/converge/options.js';
import { cdcRelayOptions } from '../../src/relay/cdc/options.js';
import { consumerOptions, processorOptions } from '../../src/inbox/options.js';
import { tenantsOptions } from '../../src/tenants/options.js';
import { partitionedConsumerOptions } from '../../src/inbox/partitioned.js';
import { partitionedTopologyOptions } from '../../src/transport/topology.js';
import { migrateOptions } from '../../src/schema/migrate.js';
import { grantsOptions } from '../../src/schema/grants.js';
import { listOutboxOptions, statusOptions } from '../../src/ops/status.js';
import { retryFailedOptions } from '../../src/ops/retry.js';
import { pipelineStatusOptions } from '../../src/ops/pipeline-options.js';
import { discardQuarantinedOptions, quarantineFilterOptions, showQuarantinedOptions } from '../../src/ops/dlq.js';
import { cleanupOptions, scheduleCleanupOptions } from '../../src/ops/cleanup.js';
import { createPartitionsAheadOptions } from '../../src/ops/partitions.js';
import { replayQuarantinedOptions } from '../../src/ops/replay.js';
import { compactionOptions } from '../../src/ops/compaction.js';
import { compatGuardOptions, compatOptions, registryOptions, unreadableOptions } from '../../src/ops/compat.js';
import { gapQueryOptions } from '../../src/inbox/parking.js';
import { reconcileOptions } from '../../src/reconcile/reconcile.js';
import { rebuildOptions } from '../../src/reconcile/rebuild.js';
import { gapRepairOptions } from '../../src/reconcile/gap-repair.js';
import { sourceSnapshotOptions } from '../../src/reconcile/consistent-read.js';
import { outboxOptions } from '../../src/outbox/append.js';
import { effectOptions, effectRefOptions } from '../../src/effects/perform.js';
import { defineEventsOptions } from '../../src/envelope/events.js';
import { convergenceMetricsOptions, metricsEndpointOptions } from '../../src/metrics/metrics.js';
import { serveMetricsOptions } from '../../src/metrics/server.js';
import { dashboardOptions } from '../../src/dashboard/options.js';
import { freshnessOptions, readFreshOptions, waitForVersionOptions } from '../../src/projection/freshness.js';
import { isCurrent, runGenerator } from './generated.js';

export const OPTIONS_DOC = fileURLToPath(new URL('../../docs/reference/options.md', import.meta.url));

/**
 * Components documented, in order: runtime components, then schema setup, then operator
 * tools (inspect, DLQ, retention, repair), then metrics. Each entry is the spec, the call it configures and an optional note.
 */
export const COMPONENTS: [spec: OptionsSpec<z.ZodType>, call: string, note?: string][] = [
  [
    convergeOptions,
    'createConverge(options)',
    'What one installation shares; what it starts inherits these and may not set them again (docs/front-door.md).',
  ],
  [outboxOptions, 'appendToOutbox(executor, event, options) / appendManyToOutbox(executor, events, options)'],
  [defineEventsOptions, 'defineEvents(schemas, options)'],
  [relayOptions, 'new Relay(options) / startRelay(options)'],
  [cdcRelayOptions, 'new CdcRelay(options) / startCdcRelay(options)'],
  [consumerOptions, 'new Consumer(options) / startConsumer(options)'],
  [processorOptions, "new DeliveryProcessor(options) (from 'converge-events/internal')"],
  [
    tenantsOptions,
    'startTenants(options) / new Tenants(options)',
    'A relay (and consumer) per tenant, a schema or a database, on one broker connection and one pool per database (docs/tenants.md).',
  ],
  [effectOptions, 'performEffect(executor, options)'],
  [effectRefOptions, 'readEffect(executor, options) / retryFailedEffect(executor, options)'],
  [partitionedTopologyOptions, 'declarePartitionedTopology(channel, options)'],
  [
    partitionedConsumerOptions,
    'startPartitionedConsumers(options)',
    'Takes these plus every Consumer option except `queue`, `declare` and `bindings`, which the topology fixes.',
  ],
  [migrateOptions, 'migrate(poolOrConnectionString, options)'],
  [grantsOptions, 'grantsSql(options)'],
  [statusOptions, 'readStatus(executor, options)'],
  [pipelineStatusOptions, 'readPipelineStatus(pool, options)'],
  [retryFailedOptions, 'retryFailedEvents(executor, options)'],
  [listOutboxOptions, 'listOutbox(executor, options)'],
  [quarantineFilterOptions, 'listQuarantine(executor, options)'],
  [showQuarantinedOptions, 'showQuarantined(executor, id, options)'],
  [replayQuarantinedOptions, 'replayQuarantined(executor, publisher, options)'],
  [discardQuarantinedOptions, 'discardQuarantined(executor, options)'],
  [gapQueryOptions, 'readGaps(executor, options)'],
  [cleanupOptions, 'cleanup(pool, options)'],
  [scheduleCleanupOptions, 'scheduleCleanup(pool, options)'],
  [createPartitionsAheadOptions, 'createPartitionsAhead(pool, options)'],
  [compactionOptions, 'compactInbox(pool, options)'],
  [waitForVersionOptions, 'waitForVersion(options)'],
  [freshnessOptions, 'readFreshness(executor, options)'],
  [readFreshOptions, 'readFresh(executor, options)'],
  [compatGuardOptions, 'createCompatGuard(options)'],
  [compatOptions, 'checkCompat(executor, options)'],
  [registryOptions, 'listRegistry(executor, options)'],
  [unreadableOptions, 'findUnreadable(executor, options)'],
  [reconcileOptions, 'reconcile(pool, options)'],
  [rebuildOptions, 'rebuildProjection(pool, options)'],
  [gapRepairOptions, 'repairGaps(consumer, options)'],
  [sourceSnapshotOptions, 'sourceSnapshot(pool, read, options)'],
  [convergenceMetricsOptions, 'registerConvergenceMetrics(pool, options)'],
  [
    metricsEndpointOptions,
    'serveRelayMetrics(relay, endpoint) / serveConsumerMetrics(consumer, endpoint) / serveTenantMetrics(tenants, endpoint)',
  ],
  [serveMetricsOptions, 'serveMetrics(registry, options)'],
  [dashboardOptions, "startDashboard(options) (from 'converge-events/dashboard')"],
];

type Def = Record<string, unknown> & { type: string };
const defOf = (schema: z.ZodType): Def => (schema as unknown as { def: Def }).def;
const metaOf = (schema: z.ZodType): Record<string, unknown> => z.globalRegistry.get(schema) ?? {};

/** A TypeScript-like name for the type a caller passes (the input side of the schema). */
export function typeName(schema: z.ZodType): string {
  const def = defOf(schema);
  switch (def.type) {
    case 'string':
    case 'number':
    case 'boolean':
      return def.type;
    case 'literal':
      return (def.values as unknown[]).map((v) => JSON.stringify(v)).join(' | ');
    case 'enum':
      return Object.values(def.entries as Record<string, string>)
        .map((v) => `'${v}'`)
        .join(' | ');
    case 'optional':
    case 'nullable':
    case 'default':
    case 'prefault':
    case 'readonly':
      return typeName(def.innerType as z.ZodType) + (def.type === 'nullable' ? ' | null' : '');
    case 'pipe':
      return typeName(def.in as z.ZodType);
    case 'union':
      return (def.options as z.ZodType[]).map(typeName).join(' | ');
    case 'array':
      return `${typeName(def.element as z.ZodType)}[]`;
    case 'record':
      return `Record<string, ${typeName(def.valueType as z.ZodType)}>`;
    case 'object':
      return `{ ${Object.entries((schema as unknown as z.ZodObject).shape)
        .map(([k, v]) => `${k}${mayOmit(v as z.ZodType) ? '?' : ''}: ${typeName(v as z.ZodType)}`)
        .join('; ')} }`;
    case 'custom':
      return customName(schema);
    default:
      return def.type;
  }
}

function customName(schema: z.ZodType): string {
  const name = metaOf(schema).typeName;
  if (typeof name !== 'string') throw new Error('a z.custom option needs .meta({ typeName }) for the docs');
  return name;
}

/** A caller may leave the key out: optional, or filled in by a default. */
function mayOmit(schema: z.ZodType): boolean {
  const optin = (schema as unknown as { _zod: { optin?: string } })._zod.optin;
  return optin === 'optional' || optin === 'defaulted';
}

function isOptional(schema: z.ZodType): boolean {
  return (schema as unknown as { _zod: { optin?: string } })._zod.optin === 'optional';
}

function defaultText(schema: z.ZodType): string {
  const meta = metaOf(schema);
  if (typeof meta.defaultText === 'string') return meta.defaultText;
  let current = schema;
  for (;;) {
    const def = defOf(current);
    if (def.type === 'default' || def.type === 'prefault')
      return formatValue(def.defaultValue, def.innerType as z.ZodType);
    if (def.type === 'pipe') current = def.in as z.ZodType;
    else if (def.type === 'optional' || def.type === 'nullable' || def.type === 'readonly')
      current = def.innerType as z.ZodType;
    else return isOptional(schema) ? '–' : 'required';
  }
}

/** `{}` prefaults show what they resolve to, e.g. the merged backoff policy. */
function formatValue(value: unknown, inner: z.ZodType): string {
  if (value !== null && typeof value === 'object' && !Array.isArray(value) && Object.keys(value).length === 0) {
    const parsed = inner.safeParse(value);
    if (
      parsed.success &&
      parsed.data !== null &&
      typeof parsed.data === 'object' &&
      Object.keys(parsed.data).length > 0
    )
      return JSON.stringify(parsed.data);
  }
  return JSON.stringify(value);
}

const cell = (text: string) => text.replace(/\|/g, '\\|').replace(/\n/g, ' ');

function table(spec: OptionsSpec<z.ZodType>, call: string, note?: string): string {
  const shape = objectShape(spec.schema);
  const rows = Object.entries(shape).map(([key, field]) => {
    const meta = metaOf(field);
    const description = (meta.description as string | undefined) ?? field.description ?? '';
    return `| \`${key}\` | \`${cell(typeName(field))}\` | \`${cell(defaultText(field))}\` | ${cell(description)} |`;
  });
  return [
    `## ${spec.component}`,
    '',
    `\`${call}\``,
    '',
    ...(note ? [note, ''] : []),
    '| option | type | default | description |',
    '|---|---|---|---|',
    ...rows,
    '',
  ].join('\n');
}

function objectShape(schema: z.ZodType): Record<string, z.ZodType> {
  const def = defOf(schema);
  if (def.type === 'object') return (schema as unknown as z.ZodObject).shape;
  if (def.type === 'pipe') return objectShape(def.in as z.ZodType);
  throw new Error(`not an object schema: ${def.type}`);
}

export function renderOptionsReference(): string {
  const header = [
    '# Options reference',
    '',
    '<!-- Generated by `npm run docs` from the option schemas in src/; do not edit by hand. -->',
    '',
    'Every entry point validates its options once: unknown keys are rejected with the closest known',
    'name suggested, and every problem is listed in one `ConfigError` (`code` `CONVERGE_INVALID_CONFIG`,',
    '`problems: { path, message }[]`, `field` = the first path). The library reads no environment',
    'variables: pass `pool` or `connectionString` (and `amqpUrl` where a broker is used).',
    '',
  ];
  return [...header, ...COMPONENTS.map(([spec, call, note]) => table(spec, call, note))].join('\n');
}

/** True when the committed file matches what the schemas render. */
export function optionsReferenceIsCurrent(path = OPTIONS_DOC): boolean {
  return isCurrent(path, renderOptionsReference);
}

runGenerator(import.meta.url, OPTIONS_DOC, renderOptionsReference);
