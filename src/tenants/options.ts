import { hostname } from 'node:os';
import { z } from 'zod';
import type { UntypedEvents } from '../envelope/events.js';
import type { ConsumerOptions } from '../inbox/index.js';
import type { RelayOptions } from '../relay/index.js';
import { ConfigError } from '../runtime/errors.js';
import { silentLoggerOption } from '../runtime/option-fields.js';
import {
  amqpUrlOption,
  amqpUrlRequired,
  brokerRequired,
  brokerUrls,
  connectionRequired,
  connectionShape,
  defineOptions,
  functionOption,
  identifierOption,
  poolModeOption,
  requireConnection,
  type OptionsInput,
  type OptionsOutput,
} from '../runtime/options.js';
import { amqpSocketOptionsOption, exchangeOption, transportOption } from '../transport/transport-option.js';

/** What startTenants sets for every relay and consumer it starts; a tenant's own options may not repeat them. */
const SET_PER_TENANT = [
  'pool',
  'connectionString',
  'poolMode',
  'amqpUrl',
  'transport',
  'amqpSocketOptions',
  'exchange',
  'schema',
  'logger',
] as const;

/** What a relay of startTenants may not do: hold a session of its own (LISTEN is shared, claim exclusive refused). */
const RELAY_REFUSED = [...SET_PER_TENANT, 'listen', 'directConnectionString', 'relayId'] as const;

/** A relay's own options under startTenants: the same for every tenant. */
export type TenantRelayOptions = Omit<RelayOptions, (typeof RELAY_REFUSED)[number]>;

/** A consumer's own options for one tenant: its queue (one per tenant), handlers and limits. */
export type TenantConsumerOptions<M extends object = UntypedEvents> = Omit<
  ConsumerOptions<M>,
  (typeof SET_PER_TENANT)[number]
>;

const isObject = (v: unknown): boolean => typeof v === 'object' && v !== null && !Array.isArray(v);

export const tenantsOptions = defineOptions(
  'startTenants',
  z
    .strictObject({
      schemas: z
        .array(identifierOption)
        .min(1)
        .max(1_000)
        .refine((list) => new Set(list).size === list.length, 'lists a schema twice')
        .describe('The tenant schemas, each migrated: one relay (and consumer, if given) per schema.'),
      ...connectionShape,
      poolMode: poolModeOption,
      maxConnections: z
        .number()
        .int()
        .min(2)
        .max(1_000)
        .default(10)
        .describe(
          'Server connections of the one pool every tenant shares, the LISTEN connection among them: the whole process holds at most this many, whatever the number of tenants. Not used with pool (its max is the budget).',
        ),
      amqpUrl: amqpUrlOption.describe(
        "RabbitMQ URL, or a cluster's node URLs (required unless transport is given); one connection for all tenants.",
      ),
      transport: transportOption.describe(
        'The broker instead of RabbitMQ at amqpUrl; its connections are shared the same way (one for all tenants).',
      ),
      amqpSocketOptions: amqpSocketOptionsOption,
      exchange: exchangeOption.describe(
        'Prefix of the tenant exchanges: schema s publishes to and consumes from the topic exchange `<exchange>.<s>`, so no event reaches another tenant.',
      ),
      name: z
        .string()
        .min(1)
        .max(100)
        .default(() => `${hostname()}:${process.pid}`)
        .meta({
          description:
            'Names the shared broker connection (`converge-tenants <name>`) and, with the schema, each relay (relayId `<name>/<schema>`).',
          defaultText: 'host:pid',
        }),
      listen: z
        .boolean()
        .default(true)
        .describe(
          'One LISTEN connection wakes the relay of the schema an outbox insert names (the trigger sends the schema); else relays poll. Needs poolMode session.',
        ),
      relay: z
        .custom<TenantRelayOptions>(isObject, 'must be an object of relay options')
        .meta({ typeName: 'TenantRelayOptions' })
        .default({})
        .describe(
          "The relays' own options (batchSize, concurrency, pollIntervalMs, ...), the same for every tenant; claim exclusive is refused (a session per tenant). pollIntervalMs defaults to 1000 here: NOTIFY wakes a relay sooner.",
        ),
      consumer: functionOption<(schema: string) => TenantConsumerOptions | undefined>(
        '(schema) => TenantConsumerOptions | undefined',
      )
        .optional()
        .describe(
          "A tenant's consumer: its queue (distinct per tenant), handlers and limits; undefined starts none for that schema.",
        ),
      logger: silentLoggerOption,
    })
    .refine(requireConnection, connectionRequired())
    .refine(brokerRequired, amqpUrlRequired())
    .transform((o) => ({ ...o, amqpUrl: o.amqpUrl === undefined ? undefined : brokerUrls(o.amqpUrl) })),
);

export type TenantsOptions = OptionsInput<typeof tenantsOptions>;
export type ResolvedTenantsOptions = OptionsOutput<typeof tenantsOptions>;

/** Refuses a per-tenant option that startTenants sets itself, naming it under `where`. */
export function refuseTenantShared(where: 'relay' | 'consumer', options: object): void {
  const refused: readonly string[] = where === 'relay' ? RELAY_REFUSED : SET_PER_TENANT;
  const problems = refused
    .filter((name) => name in options)
    .map((name) => ({ path: `${where}.${name}`, message: `set by startTenants for each tenant` }));
  if ((options as { claim?: unknown }).claim === 'exclusive')
    problems.push({
      path: `${where}.claim`,
      message: 'claim exclusive holds a session per tenant, beyond the shared pool: use claim lease',
    });
  if (problems.length > 0) throw new ConfigError(problems);
}

/** A component's ConfigError with its fields named under `where` (relay.batchSize, consumer.queue). */
export function underField(where: string, err: unknown): unknown {
  if (!(err instanceof ConfigError)) return err;
  return new ConfigError(err.problems.map((p) => ({ ...p, path: `${where}.${p.path}` })));
}
