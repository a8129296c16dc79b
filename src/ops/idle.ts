/**
 * A sleep that stop() cuts short. Once closed, every later sleep returns at once, so a
 * stop() that lands between two sleeps never waits out a poll interval or a backoff either.
 */
export class Idle {
  #timer: NodeJS.Timeout | undefined;
  #resolve: (() => void) | undefined;
  #closed = false;

  sleep(ms: number): Promise<void> {
    if (this.#closed) return Promise.resolve();
    return new Promise((resolve) => {
      this.#resolve = resolve;
      this.#timer = setTimeout(() => this.#wake(), ms);
    });
  }

  close(): void {
    this.#closed = true;
    this.#wake();
  }

  #wake(): void {
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
