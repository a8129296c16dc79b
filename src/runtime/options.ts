import type pg from 'pg';
import { z } from 'zod';
import { isValidIdentifier } from './identifier.js';
import { ConfigError, type ConfigProblem } from './errors.js';
import type { Logger } from './logger.js';
import type { BackoffPolicy } from './backoff.js';
import { DEFAULT_SCHEMA } from './defaults.js';

/**
 * One component's options: a single zod schema is the source of names, types (user type =
 * `OptionsInput`, resolved type = `OptionsOutput`), defaults and doc text (`.describe()` on
 * every field). The docs generator reads the same `schema`.
 */
export interface OptionsSpec<S extends z.ZodType> {
  readonly component: string;
  readonly schema: S;
  /** Validates once; every problem is reported in one ConfigError. */
  parse(input: unknown): z.output<S>;
}

export type OptionsInput<T extends OptionsSpec<z.ZodType>> = z.input<T['schema']>;
export type OptionsOutput<T extends OptionsSpec<z.ZodType>> = z.output<T['schema']>;

export function defineOptions<S extends z.ZodType>(component: string, schema: S): OptionsSpec<S> {
  return { component, schema, parse: (input) => parseOptions(schema, input) };
}

/** Validates an options object with a zod schema; every problem becomes one entry of a ConfigError. */
export function parseOptions<S extends z.ZodType>(schema: S, input: unknown, prefix = ''): z.output<S> {
  const result = schema.safeParse(input ?? {});
  if (result.success) return result.data;
  const problems = result.error.issues.flatMap((issue) => describeIssue(schema, issue));
  throw new ConfigError(
    problems.map((p) => ({ ...p, path: [prefix, p.path].filter(Boolean).join('.') || '(options)' })),
  );
}

function describeIssue(schema: z.ZodType, issue: z.core.$ZodIssue): ConfigProblem[] {
  const at = issue.path.map(String);
  if (issue.code !== 'unrecognized_keys') return [{ path: at.join('.'), message: issue.message }];
  const known = objectKeysAt(schema, at);
  return issue.keys.map((key) => {
    const near = closest(key, known);
    return {
      path: [...at, key].join('.'),
      message: `unknown option '${key}'${near ? ` (did you mean '${near}'?)` : ''}`,
    };
  });
}

/** The keys of the object schema found at `path`, looking through optional, default, union and pipe wrappers. */
export function objectKeysAt(schema: z.ZodType, path: readonly string[]): string[] {
  const object = objectAt(schema, path);
  return object ? Object.keys(object.shape) : [];
}

function objectAt(schema: z.ZodType, path: readonly string[]): z.ZodObject | undefined {
  const def = (schema as unknown as { def: Record<string, unknown> & { type: string } }).def;
  switch (def.type) {
    case 'object': {
      const object = schema as unknown as z.ZodObject;
      if (path.length === 0) return object;
      const next: z.ZodType | undefined = (object.shape as Record<string, z.ZodType>)[path[0]!];
      return next ? objectAt(next, path.slice(1)) : undefined;
    }
    case 'optional':
    case 'nullable':
    case 'default':
    case 'prefault':
    case 'readonly':
      return objectAt(def.innerType as z.ZodType, path);
    case 'pipe':
      return objectAt(def.in as z.ZodType, path);
    case 'union':
      for (const option of def.options as z.ZodType[]) {
        const found = objectAt(option, path);
        if (found) return found;
      }
      return undefined;
    default:
      return undefined;
  }
}

/** Levenshtein distance: insertions, deletions and substitutions each cost 1. */
export function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[b.length]!;
}

/** The known name nearest to `name`, if it is close enough to be a plausible typo (at most a third of it differs). */
export function closest(name: string, known: readonly string[]): string | undefined {
  let best: { key: string; distance: number } | undefined;
  for (const key of known) {
    const distance = editDistance(name.toLowerCase(), key.toLowerCase());
    if (!best || distance < best.distance) best = { key, distance };
  }
  return best && best.distance <= Math.max(2, Math.floor(name.length / 3)) ? best.key : undefined;
}

/** Connection strings may carry passwords; only this redacted form may appear in logs. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return '(unparseable url)';
  }
}

/** A schema or table name option: validated here so the error names the option, quoted later. */
export const identifierOption = z.string().refine(isValidIdentifier, 'must match /^[a-z_][a-z0-9_]{0,62}$/');

/** The `schema` option every component shares: the one declaration of its name, default and doc. */
export const schemaOption = identifierOption.default(DEFAULT_SCHEMA).describe("Schema holding converge's tables.");

/** A partial BackoffPolicy option, merged with `defaults`. */
export function backoffOption(defaults: BackoffPolicy) {
  return z
    .strictObject({
      initialDelayMs: z.number().int().positive().default(defaults.initialDelayMs).describe('first delay, in ms'),
      maxDelayMs: z.number().int().positive().default(defaults.maxDelayMs).describe('longest delay, in ms'),
      factor: z.number().min(1).default(defaults.factor).describe('growth per attempt'),
    })
    .prefault({});
}

const hasFunctions = (value: unknown, names: readonly string[]): boolean =>
  typeof value === 'object' &&
  value !== null &&
  names.every((name) => typeof (value as Record<string, unknown>)[name] === 'function');

/** A pg.Pool, or anything pool-shaped (query + connect). */
export const poolOption = z
  .custom<pg.Pool>(
    (v) => hasFunctions(v, ['query', 'connect']),
    'must be a pg.Pool (an object with query and connect functions)',
  )
  .meta({ typeName: 'pg.Pool' });

/** A Logger: debug, info, warn and error functions (a pino logger fits). */
export const loggerOption = z
  .custom<Logger>(
    (v) => hasFunctions(v, ['debug', 'info', 'warn', 'error']),
    'must be a logger with debug, info, warn and error functions',
  )
  .meta({ typeName: 'Logger' });

/** A function of the given type; zod checks only that it is callable. `typeName` is what the docs show. */
export function functionOption<F>(typeName = 'function') {
  return z.custom<F>((v) => typeof v === 'function', 'must be a function').meta({ typeName });
}

/** One optional fault-injection hook: a function of `signature`, called `when` it says. */
export function hookOption<F>(signature: string, when: string) {
  return functionOption<F>(signature).optional().describe(when);
}

/** `hooks`: a component's fault-injection hooks, none unless given. */
export function faultHooksOption<S extends Record<string, z.ZodOptional>>(hooks: S) {
  // Every hook is optional, so {} is a valid value; TypeScript cannot see that through a generic S.
  return z
    .strictObject(hooks)
    .default({} as never)
    .describe('Fault-injection hooks.');
}

/** An AbortSignal. */
export const signalOption = z
  .custom<AbortSignal>(
    (v) =>
      typeof v === 'object' &&
      v !== null &&
      typeof (v as AbortSignal).aborted === 'boolean' &&
      typeof (v as AbortSignal).addEventListener === 'function',
    'must be an AbortSignal',
  )
  .meta({ typeName: 'AbortSignal' });

/**
 * How the pool's connections reach PostgreSQL. Through a pooler in transaction mode a connection
 * may serve another client between two transactions, so nothing may be left on it: no named
 * prepared statement, no LISTEN, no session advisory lock.
 */
export const poolModeOption = z
  .enum(['session', 'transaction'])
  .default('session')
  .describe(
    "How the connections reach PostgreSQL. session: directly, or through a pooler in session mode. transaction: through a pooler in transaction mode (PgBouncer pool_mode=transaction), where each transaction may run on another server connection; converge then keeps nothing on a connection between transactions: statements are not prepared by name, and what needs a session (the relay's LISTEN and its exclusive claim) needs the relay's directConnectionString (docs/deployment.md#connection-poolers).",
  );

/** A PostgreSQL connection: `pool` or `connectionString`; checked as one problem naming `connectionString`. */
export const connectionShape = {
  pool: poolOption
    .optional()
    .describe('pg.Pool to use; the caller keeps ownership. Either this or connectionString is required.'),
  connectionString: z.string().min(1).optional().describe('PostgreSQL URL to open a pool from, when no pool is given.'),
};

export function requireConnection(o: { pool?: unknown; connectionString?: unknown }): boolean {
  return o.pool !== undefined || o.connectionString !== undefined;
}

/**
 * Refinement options that report the missing connection even when other fields are wrong too.
 * A fresh object per use: zod normalises refinement params in place.
 */
export const connectionRequired = () => ({
  message: 'pool or connectionString is required (the library reads no environment)',
  path: ['connectionString'],
  when: () => true,
});

/**
 * RabbitMQ: one URL, or the URLs of a cluster's nodes (tried in turn; a node that drops the
 * connection is tried last on the next reconnect). Resolved to a list by `brokerUrls`.
 */
export const amqpUrlOption = z.union([z.string().min(1), z.array(z.string().min(1)).min(1).max(32)]).optional();

/** The resolved form of amqpUrlOption: always a list. */
export function brokerUrls(value: string | readonly string[]): readonly string[] {
  return typeof value === 'string' ? [value] : value;
}

/** A relay or consumer needs a broker: a RabbitMQ URL or a transport of its own. */
export const brokerRequired = (o: { amqpUrl?: unknown; transport?: unknown }): boolean =>
  o.amqpUrl !== undefined || o.transport !== undefined;

/** Like connectionRequired, for the RabbitMQ URL of a relay or consumer. */
export const amqpUrlRequired = (message = 'amqpUrl is required (the library reads no environment)') => ({
  message,
  path: ['amqpUrl'],
  when: () => true,
});

/** The default a schema declares for one top-level option (`.default`/`.prefault`), for the CLI and the docs. */
export function optionDefault(schema: z.ZodType, key: string): unknown {
  const field = objectAt(schema, [])?.shape[key] as z.ZodType | undefined;
  return field ? declaredDefault(field) : undefined;
}

function declaredDefault(schema: z.ZodType): unknown {
  const def = (schema as unknown as { def: Record<string, unknown> & { type: string } }).def;
  if (def.type === 'default' || def.type === 'prefault') return def.defaultValue;
  if (def.type === 'pipe') return declaredDefault(def.in as z.ZodType);
  if (def.type === 'optional' || def.type === 'nullable' || def.type === 'readonly')
    return declaredDefault(def.innerType as z.ZodType);
  return undefined;
}
