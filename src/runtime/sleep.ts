/**
 * Sleeps that can be cut short: `wake()` ends the current ones (new work arrived), or, when
 * nobody sleeps, makes the next sleep return at once, so a wake-up that lands while a cycle
 * is still running (and about to find nothing) is not lost until the next poll. `close()`
 * ends them and makes every later sleep return at once, so a stop() that lands between two
 * sleeps never waits out a poll interval or a backoff either.
 *
 * `backoff()` is the other kind of wait: a floor after a failure that only `close()` ends. New
 * work says nothing about whether a lost broker or database is back, so a NOTIFY per insert must
 * not turn a reconnect backoff into a busy retry loop.
 */
export class Idle {
  readonly #sleepers = new Set<() => void>();
  readonly #backoffs = new Set<() => void>();
  #closed = false;
  #pending = false;

  sleep(ms: number): Promise<void> {
    if (this.#closed) return Promise.resolve();
    if (this.#pending) {
      this.#pending = false;
      return Promise.resolve();
    }
    return waitIn(this.#sleepers, ms);
  }

  /** Waits `ms` unless close() comes first; wake() neither ends it nor is used up by it. */
  backoff(ms: number): Promise<void> {
    if (this.#closed) return Promise.resolve();
    return waitIn(this.#backoffs, ms);
  }

  wake(): void {
    if (this.#sleepers.size === 0) this.#pending = true;
    for (const done of [...this.#sleepers]) done();
  }

  close(): void {
    this.#closed = true;
    this.wake();
    for (const done of [...this.#backoffs]) done();
  }
}

/** Waits `ms`, or less when something calls the ender it leaves in `waiters` (it removes itself). */
function waitIn(waiters: Set<() => void>, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      waiters.delete(done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    waiters.add(done);
  });
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
