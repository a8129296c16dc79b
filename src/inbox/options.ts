import type pg from 'pg';
import { z } from 'zod';
import { DEFAULT_MAX_ENVELOPE_BYTES } from '../envelope/validate.js';
import { DEFAULT_BACKOFF, type BackoffPolicy } from '../runtime/backoff.js';
import { amqpUrlFromEnv, backoffOption, databaseUrlFromEnv, identifierOption, parseOptions } from '../runtime/options.js';
import { createLogger, type Logger } from '../runtime/logger.js';
import { DEFAULT_SCHEMA } from '../runtime/defaults.js';
import type { AmqpSocketOptions } from '../transport/connection.js';
import { DEFAULT_REORDER_BUFFER, type ReorderBufferLimits } from './parking.js';
import type { SchemaEvolution } from './upcast.js';
import type { Settlement } from './types.js';
import type { BatchHandler, EventHandler } from './handler.js';
import { DEFAULT_RAMP_UP, type RampUpPolicy } from './ramp.js';

export interface ProcessorOptions {
  /** Handlers by eventType; `'*'` catches any type without its own handler. */
  handlers?: Record<string, EventHandler>;
  /** One handler for all new events of a batch; used instead of `handlers` when given. */
  batchHandler?: BatchHandler;
  /** Inbox scope: deduplication is per consumer name. */
  consumer: string;
  pool?: pg.Pool;
  connectionString?: string;
  /** Default `converge`. */
  schema?: string;
  /** Largest accepted body. Default 256 KiB. */
  maxEnvelopeBytes?: number;
  /** Attempts for handler errors before quarantine (gaps and outages wait without limit). Default 10. */
  maxAttempts?: number;
  /** Delays between attempts of one delivery. */
  backoff?: Partial<BackoffPolicy>;
  /** What to do with an eventType that has no handler. Default 'quarantine'. */
  unknownEventType?: 'quarantine' | 'ignore';
  /**
   * Incremental events that arrive before their predecessor are parked in the `parked` table
   * (committed before the ack) and applied as soon as the missing version applies. `false`
   * sends them through the retry queue instead. Default on, with the default limits.
   */
  reorderBuffer?: false | Partial<ReorderBufferLimits>;
  /**
   * Schema evolution per eventType: `{ OrderPaid: { current: 2, upcasters: { 1: (p) => ({ ...p, currency: 'EUR' }) } } }`.
   * Handlers see the current shape; a newer version than `current` is quarantined.
   */
  schemas?: SchemaEvolution;
  logger?: Logger;
}

export interface ConsumerHooks {
  /**
   * Called after a batch's transaction committed and before its deliveries are acked.
   * Throwing (or dying) here behaves like a crash in that window: the broker redelivers and
   * the inbox recognises the duplicates. Meant for fault-injection tests.
   */
  afterCommit?: (settlements: readonly Settlement[]) => void | Promise<void>;
}

export interface ConsumerOptions extends Omit<ProcessorOptions, 'consumer'> {
  /** Durable queue to consume; a companion `<queue>.retry` queue holds deliveries that wait. */
  queue: string;
  /** Inbox scope; defaults to the queue name. */
  consumer?: string;
  amqpUrl?: string;
  /**
   * Socket options for amqplib's connect: with an `amqps://` URL they go to `tls.connect`
   * (`ca`, `cert`, `key`, `passphrase`, `servername`, `rejectUnauthorized`), and `credentials`
   * can select EXTERNAL auth. Never logged.
   */
  amqpSocketOptions?: AmqpSocketOptions;
  /** Exchange the queue is bound to. Default `converge.events`. */
  exchange?: string;
  /** Binding patterns on the exchange. Default `['#']`. */
  bindings?: string[];
  /** Declare exchange, queues and bindings on start. Default true. */
  declare?: boolean;
  /** Unacknowledged deliveries held at once; bounds the consumer's memory. Default 256. */
  prefetch?: number;
  /**
   * Most deliveries processed in one transaction. Batches form naturally: whatever arrived
   * while the previous transaction ran, never waiting for more. Default 128; 1 turns batching off.
   */
  batchSize?: number;
  reconnectBackoff?: Partial<BackoffPolicy>;
  /** Stop gracefully on SIGTERM and SIGINT. Default false (the CLI turns it on). */
  handleSignals?: boolean;
  /**
   * After an outage (a new broker connection, or the database coming back) the backlog is
   * processed at a rate that starts low and grows step by step, instead of all at once.
   * Default on: 100 events/s, doubled every second, lifted at 10,000/s. `false` turns it off.
   */
  rampUp?: false | Partial<RampUpPolicy>;
  hooks?: ConsumerHooks;
}

const processorShape = {
  handlers: z.record(z.string(), z.function()).refine((h) => Object.keys(h).length > 0, 'at least one handler is required').optional(),
  batchHandler: z.function().optional(),
  pool: z.any().optional(),
  connectionString: z.string().min(1).optional(),
  schema: identifierOption.optional(),
  maxEnvelopeBytes: z.number().int().min(1024).optional(),
  maxAttempts: z.number().int().min(1).optional(),
  backoff: backoffOption,
  unknownEventType: z.enum(['quarantine', 'ignore']).optional(),
  reorderBuffer: z
    .union([z.literal(false), z.object({ maxPerAggregate: z.number().int().min(1).optional(), maxTotal: z.number().int().min(1).optional() }).strict()])
    .optional(),
  schemas: z.record(z.string(), z.object({ current: z.number().int().min(1), upcasters: z.record(z.string(), z.function()).optional() })).optional(),
  logger: z.any().optional(),
};

const oneHandlerKind = (o: { handlers?: unknown; batchHandler?: unknown }) => o.handlers !== undefined || o.batchHandler !== undefined;
const handlerRequired = { message: 'handlers or batchHandler is required', path: ['handlers'] };

const processorSchema = z.object({ ...processorShape, consumer: z.string().min(1).max(200) }).refine(oneHandlerKind, handlerRequired);

const consumerSchema = z.object({
  ...processorShape,
  queue: z.string().min(1).max(200).regex(/^[A-Za-z0-9_.:-]+$/, 'letters, digits, _ . : - only'),
  consumer: z.string().min(1).max(200).optional(),
  amqpUrl: z.string().min(1).optional(),
  amqpSocketOptions: z.record(z.string(), z.unknown()).optional(),
  exchange: z.string().min(1).max(255).optional(),
  bindings: z.array(z.string().min(1).max(255)).min(1).optional(),
  declare: z.boolean().optional(),
  prefetch: z.number().int().min(1).max(65_535).optional(),
  batchSize: z.number().int().min(1).max(10_000).optional(),
  reconnectBackoff: backoffOption,
  handleSignals: z.boolean().optional(),
  hooks: z.object({ afterCommit: z.function().optional() }).strict().optional(),
  rampUp: z
    .union([
      z.literal(false),
      z.object({
        initialPerSecond: z.number().positive().optional(),
        factor: z.number().min(1).optional(),
        stepMs: z.number().int().min(1).optional(),
        untilPerSecond: z.number().positive().optional(),
      }).strict(),
    ])
    .optional(),
}).refine(oneHandlerKind, handlerRequired);

export interface ResolvedProcessorOptions {
  handlers: Record<string, EventHandler>;
  batchHandler?: BatchHandler;
  consumer: string;
  pool?: pg.Pool;
  connectionString: string;
  schema: string;
  maxEnvelopeBytes: number;
  maxAttempts: number;
  backoff: BackoffPolicy;
  unknownEventType: 'quarantine' | 'ignore';
  /** null when turned off. */
  reorderBuffer: ReorderBufferLimits | null;
  schemas: SchemaEvolution;
  logger: Logger;
}

export interface ResolvedConsumerOptions extends ResolvedProcessorOptions {
  queue: string;
  retryQueue: string;
  amqpUrl: string;
  amqpSocketOptions: AmqpSocketOptions;
  exchange: string;
  bindings: string[];
  declare: boolean;
  prefetch: number;
  batchSize: number;
  reconnectBackoff: BackoffPolicy;
  handleSignals: boolean;
  /** null when turned off. */
  rampUp: RampUpPolicy | null;
  hooks: ConsumerHooks;
}

function processorDefaults(o: ProcessorOptions): ResolvedProcessorOptions {
  return {
    handlers: o.handlers ?? {},
    batchHandler: o.batchHandler,
    consumer: o.consumer,
    pool: o.pool,
    connectionString: o.connectionString ?? databaseUrlFromEnv(),
    schema: o.schema ?? DEFAULT_SCHEMA,
    maxEnvelopeBytes: o.maxEnvelopeBytes ?? DEFAULT_MAX_ENVELOPE_BYTES,
    maxAttempts: o.maxAttempts ?? 10,
    backoff: { ...DEFAULT_BACKOFF, initialDelayMs: 100, maxDelayMs: 10_000, ...o.backoff },
    unknownEventType: o.unknownEventType ?? 'quarantine',
    reorderBuffer: o.reorderBuffer === false ? null : { ...DEFAULT_REORDER_BUFFER, ...o.reorderBuffer },
    schemas: o.schemas ?? {},
    logger: o.logger ?? createLogger('converge-consumer'),
  };
}

export function resolveProcessorOptions(input: ProcessorOptions): ResolvedProcessorOptions {
  return processorDefaults(parseOptions(processorSchema, input) as ProcessorOptions);
}

export function resolveConsumerOptions(input: ConsumerOptions): ResolvedConsumerOptions {
  const o = parseOptions(consumerSchema, input) as ConsumerOptions;
  return {
    ...processorDefaults({ ...o, consumer: o.consumer ?? o.queue }),
    queue: o.queue,
    retryQueue: `${o.queue}.retry`,
    amqpUrl: o.amqpUrl ?? amqpUrlFromEnv(),
    amqpSocketOptions: o.amqpSocketOptions ?? {},
    exchange: o.exchange ?? 'converge.events',
    bindings: o.bindings ?? ['#'],
    declare: o.declare ?? true,
    prefetch: o.prefetch ?? 256,
    batchSize: o.batchSize ?? 128,
    reconnectBackoff: { initialDelayMs: 100, maxDelayMs: 10_000, factor: 2, ...o.reconnectBackoff },
    handleSignals: o.handleSignals ?? false,
    rampUp: o.rampUp === false ? null : { ...DEFAULT_RAMP_UP, ...o.rampUp },
    hooks: o.hooks ?? {},
  };
}
