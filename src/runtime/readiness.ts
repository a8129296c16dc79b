import { ConfigError, ReadyTimeoutError, type ConnectionFailure, type ConvergeError } from './errors.js';
import { judgeFailure, type JudgedFailure } from './connection-failure.js';
import type { ConnectionTarget } from './connection-target.js';
import type { Logger } from './logger.js';

export interface AttemptContext {
  /** Where the component's database is, for errors that do not say. */
  databaseTarget: ConnectionTarget;
  logger: Logger;
  /** Extra log fields, e.g. the queue. */
  fields?: Record<string, unknown>;
  attempt: number;
  delayMs: number;
  /** What failed, for the log line: `relay cycle`, `consumer session`. */
  what: string;
}

/**
 * The `ready()` of a long-running component: resolves the first time it is connected,
 * rejects with the permanent error that stopped it, and can be awaited with a timeout that
 * names the last failure. Nobody has to await it: an unobserved rejection is not "unhandled".
 */
export class Readiness {
  readonly #promise: Promise<void>;
  #resolve!: () => void;
  #reject!: (err: ConvergeError) => void;
  #settled = false;
  /** The last transient failure while not yet ready, for the timeout's message and for readiness probes. */
  lastFailure: ConnectionFailure | undefined;

  constructor(readonly component: string) {
    this.#promise = new Promise<void>((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    this.#promise.catch(() => undefined);
  }

  get settled(): boolean {
    return this.#settled;
  }

  resolve(): void {
    this.#settled = true;
    this.lastFailure = undefined;
    this.#resolve();
  }

  reject(err: ConvergeError): void {
    this.#settled = true;
    this.#reject(err);
  }

  /**
   * Judges one failed attempt (see judgeFailure) and logs it with the service, code, reason and
   * next delay. A fatal failure rejects readiness; the caller must then stop instead of retrying.
   */
  attemptFailed(err: unknown, context: AttemptContext): JudgedFailure {
    const judged = judgeFailure(err, context.databaseTarget, this.#settled);
    const extra = context.fields ?? {};
    if (judged.fatal) {
      context.logger.error({ ...extra, ...judged.fields }, `${this.component} cannot work as configured; stopping`);
      this.reject(judged.fatal);
      return judged;
    }
    if (judged.failure && !this.#settled) this.lastFailure = judged.failure;
    context.logger[judged.failure?.permanent ? 'error' : 'warn'](
      { ...extra, ...judged.fields, attempt: context.attempt, delayMs: context.delayMs },
      `${context.what} failed; retrying in ${context.delayMs} ms`,
    );
    return judged;
  }

  /** Waits for readiness; with `timeoutMs`, rejects with ReadyTimeoutError after that long (the component keeps trying). */
  wait(options: { timeoutMs?: number } = {}): Promise<void> {
    const { timeoutMs } = options;
    if (timeoutMs === undefined) return this.#promise;
    if (!Number.isInteger(timeoutMs) || timeoutMs < 1) throw new ConfigError('timeoutMs', 'must be a positive integer');
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new ReadyTimeoutError(this.component, timeoutMs, this.lastFailure)),
        timeoutMs,
      );
      this.#promise.then(
        () => {
          clearTimeout(timer);
          resolve();
        },
        (err: ConvergeError) => {
          clearTimeout(timer);
          reject(err);
        },
      );
    });
  }
}
