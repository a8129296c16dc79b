/**
 * Whether RabbitMQ has blocked the relay's connection (a memory or disk alarm: the broker stops
 * reading from publishing connections until the alarm clears), and since when. Times are
 * monotonic milliseconds (performance.now()) passed in, so the logic is tested without clocks.
 */
export class BlockState {
  #reason: string | undefined;
  #since: number | undefined;
  /** When the last block ended (unblocked, or its connection went away); -Infinity before any. */
  #lastEndedAt = Number.NEGATIVE_INFINITY;

  get blocked(): boolean {
    return this.#since !== undefined;
  }

  /** The broker's reason (e.g. "low on memory"), while blocked. */
  get reason(): string | undefined {
    return this.#reason;
  }

  /** True when this starts a block (a repeated notification changes nothing but the reason). */
  block(reason: string | undefined, now: number): boolean {
    this.#reason = reason;
    if (this.#since !== undefined) return false;
    this.#since = now;
    return true;
  }

  /**
   * True when this ends a block. Called on 'unblocked' and when the blocked connection closes:
   * a new connection is not blocked until the broker says so again.
   */
  unblock(now: number): boolean {
    if (this.#since === undefined) return false;
    this.#since = undefined;
    this.#reason = undefined;
    this.#lastEndedAt = now;
    return true;
  }

  /**
   * A publish written at `sentAt` had to wait, at least partly, on a blocked connection: it is
   * blocked now, or a block ended after the publish was written. Its failure (a confirm that
   * did not come, a channel that closed) says nothing about the event, so it costs no attempt.
   */
  overlaps(sentAt: number): boolean {
    return this.blocked || this.#lastEndedAt >= sentAt;
  }
}
