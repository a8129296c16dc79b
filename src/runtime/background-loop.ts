import { onShutdownSignals } from './sleep.js';

/**
 * A long-running component (relay, CDC relay) as its background loop sees it: `failure` is the
 * permanent misconfiguration that ended the loop (the one its Readiness rejected ready() with),
 * `stop()` closes what it opened.
 */
export interface LoopOwner {
  readonly failure: Error | undefined;
  stop(): Promise<void>;
}

/**
 * The start and end of a component's background loop. A loop that ends on a permanent failure
 * closes what the component opened, as stop() would, so a caller that only awaits ready() (which
 * rejects with that failure) leaves no pool or connection behind.
 */
export class BackgroundLoop {
  #loop: Promise<void> | undefined;
  #removeSignals: (() => void) | undefined;

  /** Runs `run` once, in the background; later calls do nothing. With `handleSignals`, SIGTERM and SIGINT stop the owner. */
  start(owner: LoopOwner, run: () => Promise<void>, handleSignals: boolean): void {
    if (this.#loop) return;
    if (handleSignals) this.#removeSignals = onShutdownSignals(() => owner.stop());
    this.#loop = run();
    void this.#loop.then(() => (owner.failure ? owner.stop() : undefined));
  }

  /** Resolves once the loop has ended (at once if it never started), the signal handlers removed. */
  async ended(): Promise<void> {
    await this.#loop;
    this.#removeSignals?.();
  }
}
