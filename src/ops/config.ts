import type { z } from 'zod';
import { ConfigError } from '../errors.js';

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
