import { optionDefault, type OptionsSpec } from '../runtime/options.js';
import { relayOptions } from '../relay/index.js';
import type { z } from 'zod';

/**
 * The CLI, and only the CLI, reads the environment. The library takes every connection as an
 * option; these fallbacks are the CLI's documented local defaults.
 */
export const LOCAL_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/test';
export const LOCAL_AMQP_URL = 'amqp://guest:guest@127.0.0.1:5672';

/** Where the CLI says which local default it fell back to: stderr (a command reads each URL once). */
export type Notice = (line: string) => void;
const onStderr: Notice = (line) => process.stderr.write(`${line}\n`);

/**
 * The flag, else the variable, else the local development default, said on stderr: a command run
 * outside a development clone must not quietly act on a database nobody named.
 */
function fromEnvironment(
  flag: string | undefined,
  name: string,
  env: NodeJS.ProcessEnv,
  fallback: string,
  notice: Notice,
) {
  const given = flag ?? env[name];
  if (given !== undefined && given !== '') return given;
  notice(`converge: ${name} is not set; using the local development default ${fallback}`);
  return fallback;
}

export function databaseUrl(flag: string | undefined, env = process.env, notice: Notice = onStderr): string {
  return fromEnvironment(flag, 'DATABASE_URL', env, LOCAL_DATABASE_URL, notice);
}

/** A comma-separated value names a cluster's nodes (AMQP URLs hold no unescaped commas). */
export function amqpUrl(flag: string | undefined, env = process.env, notice: Notice = onStderr): string | string[] {
  const urls = fromEnvironment(flag, 'AMQP_URL', env, LOCAL_AMQP_URL, notice)
    .split(',')
    .map((url) => url.trim())
    .filter(Boolean);
  return urls.length === 1 ? urls[0]! : urls;
}

/** The dashboard's action token: the flag, else CONVERGE_DASHBOARD_TOKEN; undefined lets the library generate one. */
export function dashboardToken(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): string | undefined {
  return flag ?? (env.CONVERGE_DASHBOARD_TOKEN || undefined);
}

export function logLevel(env: NodeJS.ProcessEnv = process.env): string {
  return env.CONVERGE_LOG_LEVEL ?? 'info';
}

/** A flag's default, read from the component's option schema so the CLI and the library never drift. */
export function schemaDefault<T>(spec: OptionsSpec<z.ZodType>, key: string): T {
  const value = optionDefault(spec.schema, key);
  if (value === undefined) throw new Error(`${spec.component} declares no default for ${key}`);
  return value as T;
}

/** Defaults of the `converge relay` flags, taken from the relay's option schema. */
export const relayFlagDefaults = {
  exchange: schemaDefault<string>(relayOptions, 'exchange'),
  routingKey: schemaDefault<string>(relayOptions, 'routingKey'),
  batchSize: schemaDefault<number>(relayOptions, 'batchSize'),
  claim: schemaDefault<string>(relayOptions, 'claim'),
  leaseMs: schemaDefault<number>(relayOptions, 'leaseMs'),
  pollIntervalMs: schemaDefault<number>(relayOptions, 'pollIntervalMs'),
  maxAttempts: schemaDefault<number>(relayOptions, 'maxAttempts'),
};
