import type { EventEmitter } from 'node:events';
import type { ConsumerEvents, ConsumerStats, RetrySettlement, Settlement } from './types.js';

/**
 * What a consumer tells the outside about its settlements: the `stats` counters and the
 * settled, drained and conflict events. Apart from the broker session in consumer.ts so that
 * fresh deliveries and drained parked events are counted and reported by the same rules.
 */
export class SettlementReport {
  readonly stats: ConsumerStats = {
    applied: 0,
    duplicate: 0,
    ignored: 0,
    quarantined: 0,
    retried: 0,
    parked: 0,
    drained: 0,
  };
  readonly #events: EventEmitter<ConsumerEvents>;

  constructor(events: EventEmitter<ConsumerEvents>) {
    this.#events = events;
  }

  /** A delivery from the broker, settled after its transaction. */
  settled(settlement: Settlement): void {
    this.#count(settlement);
    this.#events.emit('settled', settlement);
    if (settlement.action === 'ack' && settlement.outcome === 'quarantined' && settlement.conflict)
      this.#events.emit('conflict', settlement.conflict);
  }

  /** A parked event that left the reorder buffer (one handed back for a retry counts through retried()). */
  drained(settlement: Exclude<Settlement, RetrySettlement>): void {
    this.#count(settlement);
    if (settlement.outcome === 'applied') this.stats.drained++;
    this.#events.emit('drained', settlement);
    if (settlement.outcome === 'quarantined' && settlement.conflict) this.#events.emit('conflict', settlement.conflict);
  }

  retried(): void {
    this.stats.retried++;
  }

  #count(settlement: Settlement): void {
    if (settlement.action === 'retry') this.stats.retried++;
    else this.stats[settlement.outcome]++;
  }
}
