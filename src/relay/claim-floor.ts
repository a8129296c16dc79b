/**
 * Where a polling relay's claim starts scanning the pending rows. A claim walks the partial index of
 * pending rows in position order, and every claim write and mark leaves an entry behind that an index
 * scan can skip cheaply only once vacuum may remove the version it points at. While a long transaction
 * holds the xmin horizon none may be removed, and a claim from the start of the index visits every
 * version written since (docs/performance.md, "Vacuum pressure": 526,996 entries for one pending row).
 *
 * So a claim starts at a floor: the lowest pending position the previous claim saw at or above its
 * own floor, due or not (a row in backoff, a later version held back behind its aggregate's earlier
 * one, a row under a lease or in flight). Every row that was pending stays at or above it; the only
 * rows that can appear below it are ones committed late with a lower position (positions are taken at
 * insert, commits come in any order). A full scan from the start finds those: it runs whenever the
 * last one was cheap, once at least ten times its own duration has passed since it ended. A full scan
 * of a vacuumed outbox takes about a millisecond, so an idle or lightly loaded relay scans from the
 * start as before; under a pinned horizon full scans take at most about a tenth of the time. A row is
 * never skipped: at worst it waits for the next full scan.
 */
export const FULL_SCAN_COST_FACTOR = 10;

export interface ClaimScan {
  /** The lowest position the claim looks at, as text (a bigint): '0' for a full scan. */
  floor: string;
  full: boolean;
}

export class ClaimFloor {
  #floor = '0';
  #fullScanEndedAt = Number.NEGATIVE_INFINITY;
  #fullScanMs = 0;

  /** Where the claim starting at `now` (ms, a monotonic clock) scans from. */
  next(now: number): ClaimScan {
    if (now - this.#fullScanEndedAt >= FULL_SCAN_COST_FACTOR * this.#fullScanMs) return { floor: '0', full: true };
    return { floor: this.#floor, full: false };
  }

  /**
   * What a claim saw: the lowest pending position at or above its floor (null when it returned no row,
   * and so reported nothing: the floor stays). A full scan's duration sets when the next one may run.
   */
  observed(lowestPending: string | null, scan: ClaimScan, startedAt: number, endedAt: number): void {
    if (lowestPending !== null) this.#floor = lowestPending;
    if (scan.full) {
      this.#fullScanEndedAt = endedAt;
      this.#fullScanMs = Math.max(0, endedAt - startedAt);
    }
  }
}
