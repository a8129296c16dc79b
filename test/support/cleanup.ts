/**
 * Runs every cleanup step of a test rig even when earlier ones fail, then fails once with all
 * of their errors: a rig that stops at its first failed step leaves slots, schemas or queues behind.
 */
export class CleanupSteps {
  readonly #problems: unknown[] = [];

  async attempt(work: () => Promise<unknown>): Promise<void> {
    try {
      await work();
    } catch (err) {
      this.#problems.push(err);
    }
  }

  /** Throws an AggregateError naming `what` and each failure, if any step failed. */
  finish(what: string): void {
    if (this.#problems.length === 0) return;
    const reasons = this.#problems.map((problem) => String(problem)).join('; ');
    throw new AggregateError(this.#problems, `${what} failed: ${reasons}`);
  }
}
