/**
 * The charts' memory: a fixed-size ring of samples taken server-side, so every open page sees
 * the same last minutes and a reload loses nothing. Pure; the sampler feeds it.
 */
import type { PipelineStatus } from '../ops/index.js';

/** One point of the charts: counts and seconds only, never ids or payloads. */
export interface HistoryPoint {
  /** Epoch ms of the sample. */
  at: number;
  pending: number;
  failed: number;
  oldestPendingAgeSeconds: number | null;
  quarantined: number;
  parked: number;
  /** Per consumer (inbox scope) with events in the lag window. */
  lag: Record<string, { p50Seconds: number; p99Seconds: number }>;
}

export class Ring<T> {
  private readonly items: T[] = [];
  private next = 0;

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError('ring capacity must be a positive integer');
  }

  push(item: T): void {
    if (this.items.length < this.capacity) this.items.push(item);
    else this.items[this.next] = item;
    this.next = (this.next + 1) % this.capacity;
  }

  /** Oldest first. */
  toArray(): T[] {
    if (this.items.length < this.capacity) return [...this.items];
    return [...this.items.slice(this.next), ...this.items.slice(0, this.next)];
  }
}

export function historyPoint(status: PipelineStatus): HistoryPoint {
  return {
    at: Date.parse(status.checkedAt),
    pending: status.outbox.pending,
    failed: status.outbox.failed,
    oldestPendingAgeSeconds: status.outbox.oldestPendingAgeSeconds,
    quarantined: Object.values(status.failures.quarantined).reduce((sum, n) => sum + n, 0),
    parked: status.gaps.parked,
    lag: Object.fromEntries(
      status.lag.map((l) => [l.consumer, { p50Seconds: l.p50Seconds, p99Seconds: l.p99Seconds }]),
    ),
  };
}
