import { z } from 'zod';
import { eventCatalogOption, type EventCatalog, type UntypedEvents } from '../envelope/events.js';
import { ConfigError } from '../runtime/errors.js';
import { silentLoggerOption } from '../runtime/option-fields.js';
import {
  amqpUrlOption,
  connectionRequired,
  connectionShape,
  poolModeOption,
  defineOptions,
  requireConnection,
  schemaOption,
  type OptionsInput,
  type OptionsOutput,
} from '../runtime/options.js';
import { amqpSocketOptionsOption, exchangeOption, transportOption } from '../transport/transport-option.js';

/**
 * What every part of one converge installation shares: where its tables are, where its events
 * go, what they may be, and where it logs. Declared here once; the relay, the CDC relay and the
 * consumer a Converge starts inherit them and may not set them again.
 */
const sharedShape = {
  ...connectionShape,
  poolMode: poolModeOption,
  amqpUrl: amqpUrlOption.describe(
    "RabbitMQ URL, or a cluster's node URLs; needed only by what publishes or consumes (relay, consumer).",
  ),
  transport: transportOption.describe(
    'The broker instead of RabbitMQ at amqpUrl, e.g. createInProcessTransport() for development and tests.',
  ),
  amqpSocketOptions: amqpSocketOptionsOption,
  exchange: exchangeOption.describe('Topic exchange the relays publish to and the consumers bind their queues to.'),
  schema: schemaOption,
  events: eventCatalogOption
    .optional()
    .describe('Event catalog from defineEvents: checks what append writes and types the handlers of startConsumer.'),
  logger: silentLoggerOption,
};

export const convergeOptions = defineOptions(
  'createConverge',
  z.strictObject(sharedShape).refine(requireConnection, connectionRequired()),
);

export type ResolvedConvergeOptions = OptionsOutput<typeof convergeOptions>;

export type ConvergeOptions<M extends object = UntypedEvents, I extends object = M> = Omit<
  OptionsInput<typeof convergeOptions>,
  'events'
> & { events?: EventCatalog<M, I> };

export type SharedOption = keyof typeof sharedShape;

/** The options a Converge sets for everything it starts: every option of createConverge. */
export const SHARED_OPTIONS = Object.keys(sharedShape) as SharedOption[];

/**
 * Refuses a component option that createConverge already set: two schemas or two brokers in one
 * installation is how a projection ends up versioned where its inbox is not.
 */
export function refuseShared(
  component: string,
  options: object | undefined,
  shared: readonly SharedOption[] = SHARED_OPTIONS,
): void {
  const repeated = shared.filter((name) => options !== undefined && name in options);
  if (repeated.length === 0) return;
  throw new ConfigError(
    repeated.map((name) => ({
      path: name,
      message: `set once in createConverge; ${component} inherits it`,
    })),
  );
}
