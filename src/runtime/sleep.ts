/**
 * Sleeps that can be cut short: `wake()` ends the current ones (new work arrived), or, when
 * nobody sleeps, makes the next sleep return at once, so a wake-up that lands while a cycle
 * is still running (and about to find nothing) is not lost until the next poll. `close()`
 * ends them and makes every later sleep return at once, so a stop() that lands between two
 * sleeps never waits out a poll interval or a backoff either.
 */
export class Idle {
  readonly #sleepers = new Set<() => void>();
  #closed = false;
  #pending = false;

  sleep(ms: number): Promise<void> {
    if (this.#closed) return Promise.resolve();
    if (this.#pending) {
      this.#pending = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.#sleepers.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.#sleepers.add(done);
    });
  }

  wake(): void {
    if (this.#sleepers.size === 0) this.#pending = true;
    for (const done of [...this.#sleepers]) done();
  }

  close(): void {
    this.#closed = true;
    this.wake();
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
