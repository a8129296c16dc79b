import { z } from 'zod';
import { DEFAULT_MAX_ENVELOPE_BYTES } from '../envelope/validate.js';
import { eventCatalogOption, type EventCatalog, type UntypedEvents } from '../envelope/events.js';
import {
  amqpUrlOption,
  amqpUrlRequired,
  brokerRequired,
  brokerUrls,
  backoffOption,
  connectionRequired,
  connectionShape,
  poolModeOption,
  defineOptions,
  faultHooksOption,
  functionOption,
  hookOption,
  requireConnection,
  type OptionsInput,
  type OptionsOutput,
  schemaOption,
} from '../runtime/options.js';

import { DEFAULT_CONSUMER_BACKOFF, DEFAULT_MAX_ATTEMPTS } from '../runtime/defaults.js';
import {
  amqpSocketOptionsOption,
  bindingsOption,
  deliveryLimitOption,
  exchangeOption,
  queueNameOption,
  queueTypeOption,
  transportOption,
} from '../transport/transport-option.js';
import {
  handleSignalsOption,
  inboxScopeOption,
  reconnectBackoffOption,
  silentLoggerOption,
} from '../runtime/option-fields.js';
import { deadQueueName, retryQueueName, retryTiers, retryTiersOption } from '../transport/queue-arguments.js';
import { DEFAULT_REORDER_BUFFER } from './parking.js';
import type { SchemaEvolution, Upcaster } from './upcast.js';
import type { Settlement } from './types.js';
import type { BatchHandler, BatchHandlerOf, EventHandler, EventHandlers } from './handler.js';
import { DEFAULT_RAMP_UP } from './ramp.js';
import { MAX_ATTEMPT } from './headers.js';

export interface ConsumerHooks {
  /**
   * Called after a batch's transaction committed and before its deliveries are acked.
   * Throwing (or dying) here behaves like a crash in that window: the broker redelivers and
   * the inbox recognises the duplicates. Meant for fault-injection tests.
   */
  afterCommit?: (settlements: readonly Settlement[]) => void | Promise<void>;
}

/** `false` turns the feature off (resolved to null); an object overrides some limits. */
function limitsOrOff<T extends z.ZodRawShape>(shape: T) {
  return z
    .union([z.literal(false), z.strictObject(shape)])
    .prefault({} as never)
    .transform((v) => (v === false ? null : v));
}

const consumerHooksOption = faultHooksOption({
  afterCommit: hookOption<NonNullable<ConsumerHooks['afterCommit']>>(
    '(settlements) => void | Promise<void>',
    'After a batch committed, before its deliveries are acked (fault injection).',
  ),
});

const reorderBufferOption = limitsOrOff({
  maxPerAggregate: z
    .number()
    .int()
    .min(1)
    .default(DEFAULT_REORDER_BUFFER.maxPerAggregate)
    .describe('Parked events of one aggregate; beyond it an early event waits in the retry queue.'),
  maxTotal: z
    .number()
    .int()
    .min(1)
    .default(DEFAULT_REORDER_BUFFER.maxTotal)
    .describe('Parked events of the whole consumer.'),
});

const rampUpOption = limitsOrOff({
  initialPerSecond: z
    .number()
    .positive()
    .default(DEFAULT_RAMP_UP.initialPerSecond)
    .describe('Events per second right after the outage.'),
  factor: z.number().min(1).default(DEFAULT_RAMP_UP.factor).describe('Multiplier per step.'),
  stepMs: z.number().int().min(1).default(DEFAULT_RAMP_UP.stepMs).describe('Step length in ms.'),
  untilPerSecond: z
    .number()
    .positive()
    .default(DEFAULT_RAMP_UP.untilPerSecond)
    .describe('Once the limit reaches this rate it is lifted.'),
});

const processorShape = {
  events: eventCatalogOption
    .optional()
    .describe(
      'Event catalog from defineEvents: types the handlers; with schemas, a payload that fails its schema is quarantined (invalid-envelope) and a type it does not list follows unknownEventType.',
    ),
  handlers: z
    .record(z.string(), functionOption<EventHandler>('EventHandler'))
    .refine((h) => Object.keys(h).length > 0, 'at least one handler is required')
    .optional()
    .describe(
      "Handlers by eventType; '*' catches any type without its own handler. With `events`, the keys must be its types and each handler's payload is typed by its key.",
    ),
  batchHandler: functionOption<BatchHandler>('BatchHandler')
    .optional()
    .describe('One handler for all new events of a batch; used instead of handlers when given.'),
  ...connectionShape,
  poolMode: poolModeOption,
  schema: schemaOption,
  maxEnvelopeBytes: z
    .number()
    .int()
    .min(1024)
    .default(DEFAULT_MAX_ENVELOPE_BYTES)
    .describe('Largest accepted body, in bytes.'),
  maxAttempts: z
    .number()
    .int()
    .min(1)
    // The attempt header is bounded (MAX_ATTEMPT): a larger limit could never be reached, and a failing handler would retry for ever.
    .max(MAX_ATTEMPT)
    .default(DEFAULT_MAX_ATTEMPTS)
    .describe('Attempts for handler errors before quarantine (gaps and outages wait without limit).'),
  backoff: backoffOption(DEFAULT_CONSUMER_BACKOFF).describe('Delays between attempts of one delivery.'),
  unknownEventType: z
    .enum(['quarantine', 'ignore'])
    .default('quarantine')
    .describe('What to do with an eventType that has no handler.'),
  reorderBuffer: reorderBufferOption.describe(
    'Early incremental events are parked (committed before the ack) and applied once their predecessor applies; false sends them through the retry queue. Resolved to null when off.',
  ),
  schemas: z
    .record(
      z.string(),
      z.strictObject({
        current: z.number().int().min(1),
        upcasters: z.record(z.string(), functionOption<Upcaster>('Upcaster')).optional(),
      }),
    )
    .default({})
    .describe(
      'Schema evolution per eventType: { current, upcasters: { fromVersion: fn } }; a newer version than current is quarantined. A type with its own handler and no entry here is at version 1.',
    ),
  logger: silentLoggerOption,
};

const oneHandlerKind = (o: { handlers?: unknown; batchHandler?: unknown }) =>
  o.handlers !== undefined || o.batchHandler !== undefined;
const handlerRequired = () => ({
  message: 'handlers or batchHandler is required',
  path: ['handlers'],
  when: () => true,
});
/** Resolved options always carry a handler map (empty when a batchHandler does the work). */
const withHandlers = <T extends { handlers?: Record<string, EventHandler> | undefined }>(o: T) => ({
  ...o,
  handlers: o.handlers ?? {},
});
const consumerName = inboxScopeOption;

export const processorOptions = defineOptions(
  'DeliveryProcessor',
  z
    .strictObject({
      ...processorShape,
      consumer: consumerName.describe('Inbox scope: deduplication is per consumer name.'),
    })
    .refine(oneHandlerKind, handlerRequired())
    .refine(requireConnection, connectionRequired())
    .transform(withHandlers),
);

export const consumerOptions = defineOptions(
  'Consumer',
  z
    .strictObject({
      queue: queueNameOption.describe(
        'Durable queue to consume; its retry tiers `<queue>.retry.<delay>` (see retryTiersMs) hold deliveries that wait.',
      ),
      ...processorShape,
      consumer: consumerName.optional().describe('Inbox scope; defaults to the queue name.'),
      amqpUrl: amqpUrlOption.describe(
        "RabbitMQ URL, or a cluster's node URLs to fail over between (required unless transport is given).",
      ),
      transport: transportOption.describe(
        'The broker to consume from instead of RabbitMQ at amqpUrl, e.g. createInProcessTransport() for development and tests (docs/transports.md). amqpUrl and amqpSocketOptions are then not used.',
      ),
      amqpSocketOptions: amqpSocketOptionsOption,
      exchange: exchangeOption.describe('Exchange the queue is bound to.'),
      bindings: bindingsOption.describe('Binding patterns on the exchange.'),
      declare: z.boolean().default(true).describe('Declare exchange, queues and bindings on start.'),
      queueType: queueTypeOption
        .default('classic')
        .describe(
          "Type of the queue and its retry tiers. `quorum` (replicated, for a cluster) also declares `<queue>.dead` as the dead-letter target past deliveryLimit, and the consumer quarantines what lands there (`delivery-limit-exceeded`). An existing queue's type and arguments cannot change: declaring it with others fails with 406 PRECONDITION_FAILED (migration: docs/scaling.md). With declare: false it still says whether to consume `<queue>.dead`.",
        ),
      deliveryLimit: deliveryLimitOption.describe(
        'With queueType `quorum`: how often one message may come back (nack, lost channel or connection) before the broker dead-letters it into `<queue>.dead`. Always declared explicitly (RabbitMQ 4 would apply 20, then drop). Retries never count: each is a new copy.',
      ),
      retryTiersMs: retryTiersOption,
      prefetch: z
        .number()
        .int()
        .min(1)
        .max(65_535)
        .default(256)
        .describe("Unacknowledged deliveries held at once; bounds the consumer's memory."),
      batchSize: z
        .number()
        .int()
        .min(1)
        .max(10_000)
        .default(128)
        .describe('Most deliveries processed in one transaction; 1 turns batching off.'),
      reconnectBackoff: reconnectBackoffOption,
      handleSignals: handleSignalsOption,
      rampUp: rampUpOption.describe(
        'After an outage the backlog is processed at a rate that starts low and grows step by step; false turns it off. Resolved to null when off.',
      ),
      hooks: consumerHooksOption,
    })
    .refine(oneHandlerKind, handlerRequired())
    .refine(requireConnection, connectionRequired())
    .refine(brokerRequired, amqpUrlRequired())
    .transform((o) => ({
      ...withHandlers(o),
      amqpUrl: o.amqpUrl === undefined ? undefined : brokerUrls(o.amqpUrl),
      consumer: o.consumer ?? o.queue,
      /** The single retry queue of earlier versions: declared so what waits in it drains back; never sent to. */
      retryQueue: retryQueueName(o.queue),
      retryTiers: retryTiers(o.queue, o.retryTiersMs),
      /** Null for a classic queue, which has no dead-letter target. */
      deadQueue: o.queueType === 'quorum' ? deadQueueName(o.queue) : null,
    })),
);

/**
 * The options an event map types (the zod schema above checks them at runtime, untyped). `M`
 * is inferred from `events` only (NoInfer elsewhere, so handlers written apart cannot pull it
 * their way), or given: `startConsumer<OrderEvents>({...})`.
 */
export interface TypedHandlerOptions<M extends object = UntypedEvents> {
  events?: EventCatalog<M, object>;
  handlers?: EventHandlers<NoInfer<M>>;
  batchHandler?: BatchHandlerOf<NoInfer<M>>;
  schemas?: SchemaEvolution<NoInfer<M>>;
}
type Typed = keyof TypedHandlerOptions;

export type ProcessorOptions<M extends object = UntypedEvents> = Omit<OptionsInput<typeof processorOptions>, Typed> &
  TypedHandlerOptions<M>;
export type ResolvedProcessorOptions = OptionsOutput<typeof processorOptions>;
export type ConsumerOptions<M extends object = UntypedEvents> = Omit<OptionsInput<typeof consumerOptions>, Typed> &
  TypedHandlerOptions<M>;
export type ResolvedConsumerOptions = OptionsOutput<typeof consumerOptions>;

/** Options already resolved here pass through untouched, so a consumer hands its own to its processor. */
const resolved = new WeakSet<object>();

export function resolveProcessorOptions<M extends object>(
  input: ProcessorOptions<M> | ResolvedProcessorOptions,
): ResolvedProcessorOptions {
  if (resolved.has(input)) return input as ResolvedProcessorOptions;
  const options = processorOptions.parse(input);
  resolved.add(options);
  return options;
}

export function resolveConsumerOptions<M extends object>(input: ConsumerOptions<M>): ResolvedConsumerOptions {
  const options = consumerOptions.parse(input);
  resolved.add(options);
  return options;
}
