import { hostname } from 'node:os';
import type pg from 'pg';
import { z } from 'zod';
import { DEFAULT_SCHEMA } from '../runtime/defaults.js';
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
  poolOption,
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

const MAX_TENANTS = 1_000;
/** The process's connections with schemas, when maxConnections is not given. */
export const TENANT_MAX_CONNECTIONS = 10;
/** With databases and no maxConnections: connections per opened database. */
const PER_DATABASE = 3;
/** A database's pool holds its LISTEN connection and at least one for claims, marks and consumer transactions. */
const MIN_PER_DATABASE = 2;

const isObject = (v: unknown): boolean => typeof v === 'object' && v !== null && !Array.isArray(v);

export const tenantsOptions = defineOptions(
  'startTenants',
  z
    .strictObject({
      schemas: z
        .array(identifierOption)
        .min(1)
        .max(MAX_TENANTS)
        .refine((list) => new Set(list).size === list.length, 'lists a schema twice')
        .optional()
        .describe(
          'A schema per tenant, each migrated, on the one server of connectionString (or pool): one relay (and consumer, if given) per schema. Either this or databases.',
        ),
      databases: z
        .record(identifierOption, z.union([z.string().min(1), poolOption]))
        .refine((map) => Object.keys(map).length >= 1, 'names no database')
        .refine((map) => Object.keys(map).length <= MAX_TENANTS, `names more than ${MAX_TENANTS} databases`)
        .optional()
        .meta({ typeName: 'Record<string, string | pg.Pool>' })
        .describe(
          "A database per tenant: the tenant's name, then its PostgreSQL URL (or a pg.Pool the caller keeps), each migrated in `schema`. One pool per database, the budget split between them. Either this or schemas.",
        ),
      schema: identifierOption
        .optional()
        .meta({ defaultText: 'converge' })
        .describe("With databases: the schema holding converge's tables in every tenant database."),
      ...connectionShape,
      poolMode: poolModeOption,
      maxConnections: z
        .number()
        .int()
        .min(2)
        .max(10_000)
        .optional()
        .meta({ defaultText: '10; with databases, 3 per database' })
        .describe(
          'Server connections of the whole process, whatever the number of tenants, the LISTEN connections among them. With schemas: one pool of this size. With databases: split evenly, at least 2 per database; pools passed in databases keep their own max. Not used with pool.',
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
            'Names the shared broker connection (`converge-tenants <name>`) and, with the tenant, each relay (relayId `<name>/<tenant>`).',
          defaultText: 'host:pid',
        }),
      listen: z
        .boolean()
        .default(true)
        .describe(
          'One LISTEN connection per database wakes the relay of the schema an outbox insert names (the trigger sends the schema); else relays poll. Needs poolMode session.',
        ),
      relay: z
        .custom<TenantRelayOptions>(isObject, 'must be an object of relay options')
        .meta({ typeName: 'TenantRelayOptions' })
        .default({})
        .describe(
          "The relays' own options (batchSize, concurrency, pollIntervalMs, ...), the same for every tenant; claim exclusive is refused (a session per tenant). pollIntervalMs defaults to 1000 here: NOTIFY wakes a relay sooner.",
        ),
      consumer: functionOption<(tenant: string) => TenantConsumerOptions | undefined>(
        '(tenant) => TenantConsumerOptions | undefined',
      )
        .optional()
        .describe(
          "A tenant's consumer, given the tenant's name (its schema, or its key in databases): its queue (distinct per tenant), handlers and limits; undefined starts none for that tenant.",
        ),
      logger: silentLoggerOption,
    })
    .superRefine(checkTenantLayout)
    .refine(brokerRequired, amqpUrlRequired())
    .transform(resolveTenantLayout),
);

interface LayoutInput {
  schemas?: string[] | undefined;
  databases?: Record<string, unknown> | undefined;
  schema?: string | undefined;
  pool?: unknown;
  connectionString?: string | undefined;
  maxConnections?: number | undefined;
}

/** Schemas on one server, or databases: exactly one, with the connection options that fit it. */
function checkTenantLayout(o: LayoutInput, ctx: z.RefinementCtx): void {
  const problem = (path: string, message: string) => ctx.addIssue({ code: 'custom', path: [path], message });
  if ((o.schemas === undefined) === (o.databases === undefined))
    return problem('schemas', 'give schemas (a schema per tenant) or databases (a database per tenant), one of them');
  if (o.schemas !== undefined) {
    if (o.schema !== undefined) problem('schema', 'only with databases: with schemas each tenant is its schema');
    if (!requireConnection(o)) problem('connectionString', connectionRequired().message);
    return;
  }
  for (const name of ['pool', 'connectionString'] as const)
    if (o[name] !== undefined) problem(name, 'with databases each tenant database has its own URL or pool there');
  const opened = Object.values(o.databases!).filter((db) => typeof db === 'string').length;
  if (o.maxConnections !== undefined && opened > 0 && o.maxConnections < opened * MIN_PER_DATABASE)
    problem(
      'maxConnections',
      `${o.maxConnections} cannot give each of ${opened} databases ${MIN_PER_DATABASE} connections: at least ${opened * MIN_PER_DATABASE}`,
    );
}

/** Where one tenant lives: its schema, in the database whose pool is `pools[database]`. */
export interface TenantSite {
  tenant: string;
  schema: string;
  database: number;
}

/** One pool of the process: opened from a URL with `max` connections, or the caller's. */
export interface TenantDatabase {
  connectionString?: string | undefined;
  pool?: pg.Pool | undefined;
  max: number;
}

function resolveTenantLayout<O extends LayoutInput & { amqpUrl?: string | string[] | undefined }>(o: O) {
  const amqpUrl = o.amqpUrl === undefined ? undefined : brokerUrls(o.amqpUrl);
  if (o.schemas !== undefined) {
    const database: TenantDatabase = {
      connectionString: o.connectionString,
      pool: o.pool as pg.Pool | undefined,
      max: o.maxConnections ?? TENANT_MAX_CONNECTIONS,
    };
    const sites = o.schemas.map((schema) => ({ tenant: schema, schema, database: 0 }));
    return { ...o, amqpUrl, layout: 'schemas' as const, sites, pools: [database] };
  }
  const entries = Object.entries(o.databases!);
  const opened = entries.filter(([, db]) => typeof db === 'string').length;
  const max = Math.floor((o.maxConnections ?? opened * PER_DATABASE) / Math.max(opened, 1));
  const pools: TenantDatabase[] = entries.map(([, db]) =>
    typeof db === 'string' ? { connectionString: db, max } : { pool: db as pg.Pool, max },
  );
  const schema = o.schema ?? DEFAULT_SCHEMA;
  const sites = entries.map(([tenant], database) => ({ tenant, schema, database }));
  return { ...o, amqpUrl, layout: 'databases' as const, sites, pools };
}

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
