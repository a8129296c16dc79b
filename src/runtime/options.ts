import { z } from 'zod';
import { isValidIdentifier } from './identifier.js';
import { ConfigError } from './errors.js';

/** Validates an options object with a zod schema, turning the first problem into a ConfigError naming the field. */
export function parseOptions<S extends z.ZodType>(schema: S, input: unknown, prefix = ''): z.output<S> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const path = issue?.path.join('.') || '(options)';
  throw new ConfigError(prefix ? `${prefix}.${path}` : path, issue?.message ?? 'invalid');
}

export const DEFAULT_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/test';
export const DEFAULT_AMQP_URL = 'amqp://guest:guest@127.0.0.1:5672';

export function databaseUrlFromEnv(): string {
  return process.env.DATABASE_URL ?? DEFAULT_DATABASE_URL;
}

export function amqpUrlFromEnv(): string {
  return process.env.AMQP_URL ?? DEFAULT_AMQP_URL;
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

/** A partial BackoffPolicy option. */
export const backoffOption = z
  .object({
    initialDelayMs: z.number().int().positive().optional(),
    maxDelayMs: z.number().int().positive().optional(),
    factor: z.number().min(1).optional(),
  })
  .optional();
