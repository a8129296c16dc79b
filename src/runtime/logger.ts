import { pino } from 'pino';
import { ConvergeError, PermanentError, TransientError } from './errors.js';

/**
 * The logging surface converge needs; a pino logger satisfies it. converge logs ids,
 * versions, counts and error codes, never payloads or connection strings.
 */
export interface Logger {
  debug(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/** A pino logger writing JSON lines to stdout; for the CLI, which reads the level from its environment. */
export function createLogger(name: string, level = 'info'): Logger {
  return pino({ name, level });
}

/** The library's default: it writes nothing unless given a logger. */
export const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} };

/**
 * Error details safe for a log line. converge's own messages never carry payloads, so they
 * are kept; any other error (a handler's, a driver's) can quote data, e.g. PostgreSQL's
 * `invalid input syntax for type integer: "<value>"`, so only its class and code are logged.
 */
export function describeError(err: unknown): { err: string; code?: string } {
  // Handlers write the messages of PermanentError / TransientError: they may carry payload data.
  if (err instanceof PermanentError || err instanceof TransientError) return { err: err.name, code: err.code };
  if (err instanceof ConvergeError) return { err: `${err.name}: ${err.message}`, code: err.code };
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    // Driver and system codes are strings (pg, node) or numbers; anything else says nothing useful.
    return { err: err.name, ...(typeof code === 'string' || typeof code === 'number' ? { code: String(code) } : {}) };
  }
  return { err: typeof err };
}
