/** A sleep that `wake()` cuts short, so stop() never waits out a poll interval or a backoff. */
export class Idle {
  #timer: NodeJS.Timeout | undefined;
  #resolve: (() => void) | undefined;

  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      this.#resolve = resolve;
      this.#timer = setTimeout(() => this.wake(), ms);
    });
  }

  wake(): void {
    clearTimeout(this.#timer);
    const resolve = this.#resolve;
    this.#resolve = undefined;
    resolve?.();
  }
}

/** Registers SIGTERM/SIGINT handlers that call `stop`, and returns a function removing them. */
export function onShutdownSignals(stop: () => Promise<void>): () => void {
  const handler = () => void stop();
  process.once('SIGTERM', handler);
  process.once('SIGINT', handler);
  return () => {
    process.off('SIGTERM', handler);
    process.off('SIGINT', handler);
  };
}
