import { parseLsn } from './lsn.js';

/** One decoded transaction: its commit LSN and how many of its events still wait for the broker. */
interface Transaction {
  commitLsn: string;
  unconfirmed: number;
  committed: boolean;
  rejected: boolean;
}

/**
 * Which LSN the CDC relay may acknowledge, from what the stream delivered and what the broker
 * said. Events arrive grouped by transaction (begin, inserts, commit, with the commit LSN known
 * at begin); the broker confirms or rejects them in any order. The slot may only be advanced to
 * the commit LSN of the last transaction that, with every transaction before it, is committed
 * and fully confirmed: PostgreSQL then never resends those, and everything after is resent.
 * Pure: no I/O, no clock of its own (callers pass `now`), so it is tested without services.
 */
export class CdcProgress {
  readonly #transactions: Transaction[] = [];
  readonly #owner = new Map<string, Transaction>();
  /** Unconfirmed events by key with when they arrived; insertion order is arrival order. */
  readonly #receivedAt = new Map<string, number>();
  #open: Transaction | undefined;
  #ackable: string | undefined;

  /** A transaction starts; `commitLsn` is the LSN of its commit record (pgoutput sends it with BEGIN). */
  begin(commitLsn: string): void {
    if (this.#open) throw new Error('begin inside an open transaction');
    const transaction: Transaction = { commitLsn, unconfirmed: 0, committed: false, rejected: false };
    const last = this.#transactions.at(-1)?.commitLsn ?? this.#ackable;
    if (last !== undefined && parseLsn(commitLsn) <= parseLsn(last))
      throw new Error(`commit LSN ${commitLsn} does not follow ${last}`);
    this.#transactions.push(transaction);
    this.#open = transaction;
  }

  /** An event of the open transaction was received (and is being published); `key` is unique while pending. */
  add(key: string, now: number): void {
    const transaction = this.#open;
    if (!transaction) throw new Error('event outside a transaction');
    if (this.#owner.has(key)) throw new Error(`event ${key} is already pending`);
    transaction.unconfirmed++;
    this.#owner.set(key, transaction);
    this.#receivedAt.set(key, now);
  }

  /** The open transaction's commit arrived: no more events will join it. */
  commit(): void {
    if (!this.#open) throw new Error('commit without a transaction');
    this.#open.committed = true;
    this.#open = undefined;
  }

  /** The broker confirmed (and did not return) the event. Unknown keys are ignored (a late answer). */
  confirm(key: string): void {
    const transaction = this.#owner.get(key);
    if (!transaction) return;
    this.#owner.delete(key);
    this.#receivedAt.delete(key);
    transaction.unconfirmed--;
  }

  /** The broker did not take the event: its transaction, and so everything after it, is never acknowledgeable. */
  reject(key: string): void {
    const transaction = this.#owner.get(key);
    if (transaction) transaction.rejected = true;
  }

  /**
   * The highest commit LSN that may be acknowledged, or undefined while none may. Finished
   * transactions are dropped as they become acknowledgeable, so memory follows what is in flight.
   */
  ackable(): string | undefined {
    for (;;) {
      const head = this.#transactions[0];
      if (!head || !head.committed || head.rejected || head.unconfirmed > 0) break;
      this.#transactions.shift();
      this.#ackable = head.commitLsn;
    }
    return this.#ackable;
  }

  /** Nothing received is waiting for the broker and no transaction is open: the stream is caught up. */
  get settled(): boolean {
    this.ackable();
    return this.#open === undefined && this.#transactions.length === 0;
  }

  /** Events received and not yet confirmed. */
  get unconfirmed(): number {
    return this.#receivedAt.size;
  }

  /** Age in ms of the oldest event received and not yet confirmed, 0 when none waits. */
  oldestUnconfirmedAgeMs(now: number): number {
    for (const receivedAt of this.#receivedAt.values()) return Math.max(0, now - receivedAt);
    return 0;
  }
}
