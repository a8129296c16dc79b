import type { EventEmitter } from 'node:events';
import { backoffDelay, type BackoffPolicy } from './backoff.js';
import type { JudgedFailure } from './connection-failure.js';
import type { ConnectionTarget } from './connection-target.js';
import type { Logger } from './logger.js';
import { Readiness } from './readiness.js';
import { Idle, onShutdownSignals } from './sleep.js';

/** What one long-running engine (relay, CDC relay, consumer) tells the shell it runs in. */
export interface ServiceSpec {
  /** Names the engine in ready() timeouts and fatal log lines: `relay r1`, `consumer orders`. */
  component: string;
  /** What one failed attempt was, for its log line: `relay cycle`, `consumer session`. */
  what: string;
  logger: Logger;
  /** Where the engine's database is, for connection errors that do not say. */
  databaseTarget: () => ConnectionTarget;
  reconnectBackoff: BackoffPolicy;
  handleSignals: boolean;
  /** Receives 'error' for every failed attempt, if anyone listens (an EventEmitter throws on an unheard 'error'). */
  emitter: Pick<EventEmitter, 'emit' | 'listenerCount'>;
  /** Extra log fields, e.g. the queue. */
  fields?: Record<string, unknown>;
  /** Runs first on stop(), after the shell stopped waiting: ends what the current step is waiting on. */
  interrupt?: () => void;
  /** Runs last on stop(), once the loop ended: closes what the engine opened. */
  close: () => Promise<void>;
}

/**
 * The shell every long-running engine runs in: start once, repeat a step until stopped, judge a
 * failed step (log it, back off with the reconnect schedule, or stop for good on a permanent
 * misconfiguration before the engine was ever ready), `ready()` with a timeout, SIGTERM/SIGINT,
 * and a stop that lets the step in progress finish before the engine closes what it opened.
 * The engine keeps only what its step does.
 */
export class Service {
  /** The engine's waits between steps: stop() ends them, `wake()` ends a sleep early. */
  readonly idle = new Idle();
  readonly readiness: Readiness;
  readonly #spec: ServiceSpec;
  #stopping = false;
  #fatal: Error | undefined;
  #loop: Promise<void> | undefined;
  #stopped: Promise<void> | undefined;
  #removeSignals: (() => void) | undefined;

  constructor(spec: ServiceSpec) {
    this.#spec = spec;
    this.readiness = new Readiness(spec.component);
  }

  /** stop() was called, or a permanent failure ended the engine. */
  get stopping(): boolean {
    return this.#stopping;
  }

  /** The permanent misconfiguration that stopped the engine, if one did. */
  get failure(): Error | undefined {
    return this.#fatal;
  }

  /**
   * Repeats `step` in the background until stop(); later calls do nothing. A step that throws is
   * judged (attemptFailed) and, unless that was fatal, the next one waits the reconnect backoff;
   * a step calls `succeeded` once it got through, which starts that backoff from its floor again.
   * `afterLoop` runs once the loop ended, before the engine is closed.
   */
  start(
    step: (succeeded: () => void) => Promise<void>,
    hooks: { onFailure?: (judged: JudgedFailure) => void | Promise<void>; afterLoop?: () => Promise<void> } = {},
  ): void {
    if (this.#loop) return;
    if (this.#spec.handleSignals) this.#removeSignals = onShutdownSignals(() => this.stop());
    this.#loop = this.#run(step, hooks.onFailure).finally(() => hooks.afterLoop?.());
    // A permanent failure ended the loop: close what the engine opened, as stop() would, so a caller
    // that only awaits ready() (which rejected) leaves no pool or connection behind.
    void this.#loop.then(() => (this.#fatal ? this.stop() : undefined));
  }

  async #run(
    step: (succeeded: () => void) => Promise<void>,
    onFailure: ((judged: JudgedFailure) => void | Promise<void>) | undefined,
  ): Promise<void> {
    let failures = 0;
    while (!this.#stopping) {
      try {
        await step(() => (failures = 0));
      } catch (err) {
        // stop() abandoned a connect in progress: that is no failure to report.
        if (this.#stopping) break;
        failures++;
        const delayMs = backoffDelay(failures, this.#spec.reconnectBackoff);
        const judged = this.attemptFailed(err, failures, delayMs);
        await onFailure?.(judged);
        if (!judged.fatal) await this.idle.backoff(delayMs);
      }
    }
  }

  /**
   * Judges one failed attempt: logs it, emits 'error' to listeners, and on a permanent
   * misconfiguration before the engine was ready rejects ready() and stops the loop.
   */
  attemptFailed(err: unknown, attempt: number, delayMs: number): JudgedFailure {
    const { logger, what, fields } = this.#spec;
    const judged = this.readiness.attemptFailed(err, {
      databaseTarget: this.#spec.databaseTarget(),
      logger,
      ...(fields ? { fields } : {}),
      attempt,
      delayMs,
      what,
    });
    if (judged.fatal) {
      this.#fatal = judged.fatal;
      this.#stopping = true;
      this.idle.close();
    }
    const { emitter } = this.#spec;
    if (emitter.listenerCount('error') > 0) emitter.emit('error', judged.fatal ?? err);
    return judged;
  }

  /** Ends the loop after the step in progress, then closes the engine; every call returns the same promise. */
  stop(): Promise<void> {
    this.#stopped ??= this.#shutdown();
    return this.#stopped;
  }

  async #shutdown(): Promise<void> {
    this.#stopping = true;
    this.idle.close();
    this.#spec.interrupt?.();
    await this.#loop;
    this.#removeSignals?.();
    await this.#spec.close();
  }
}
