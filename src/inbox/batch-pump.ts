import type { TransportDelivery } from '../transport/transport.js';
import type { RampAdmission } from './ramp.js';

/**
 * Batches form on their own: while one transaction runs, deliveries pile up here (at most
 * `prefetch` of them) and the next transaction takes up to `batchSize`. At low load a delivery
 * is processed the moment it arrives; nothing ever waits for a batch to fill. One batch runs at
 * a time, so a channel's deliveries are settled in the order they came.
 */
export class BatchPump {
  readonly #batchSize: number;
  readonly #ramp: RampAdmission | undefined;
  #buffer: TransportDelivery[] = [];
  #pumping = false;
  #inFlight: Promise<void> = Promise.resolve();

  constructor(batchSize: number, ramp: RampAdmission | undefined) {
    this.#batchSize = batchSize;
    this.#ramp = ramp;
  }

  /** Queues a delivery; unless a batch is running already, batches go to `handleBatch` until none is left. */
  push(message: TransportDelivery, handleBatch: (messages: TransportDelivery[]) => Promise<void>): void {
    this.#buffer.push(message);
    if (this.#pumping) return;
    this.#pumping = true;
    this.#inFlight = (async () => {
      try {
        while (this.#buffer.length > 0) {
          const wanted = Math.min(this.#buffer.length, this.#batchSize);
          const granted = this.#ramp ? await this.#ramp.admit(wanted) : wanted;
          await handleBatch(this.#buffer.splice(0, granted));
        }
      } finally {
        this.#pumping = false;
      }
    })();
  }

  /** Drops the deliveries not yet started (they go back to the queue when their channel closes). */
  discard(): void {
    this.#buffer.length = 0;
  }

  /** Resolves once no batch is running, a batch started while waiting included. */
  async settled(): Promise<void> {
    let settledUpTo: Promise<void>;
    do {
      settledUpTo = this.#inFlight;
      await settledUpTo;
    } while (settledUpTo !== this.#inFlight);
  }
}
