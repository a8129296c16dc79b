import type { NoRowsWrittenError, StaleVersionError, VersionGapError } from '../runtime/errors.js';
import type { RetryTransactionSignal } from '../db/transaction.js';

/**
 * A verdict of the projection helpers that forbids committing the transaction it was reached
 * on; NoRowsWrittenError among them, since the version moved but the read model was not written.
 */
export type BlockedVerdict = VersionGapError | StaleVersionError | RetryTransactionSignal | NoRowsWrittenError;

/**
 * What the projection helpers found on one transaction while a handler ran. The helpers
 * throw their verdict, but a handler may catch it; the consumer reads the watch after the
 * handler returned, so a swallowed gap still rolls the transaction back.
 */
export interface VersionWatch {
  /** The first blocked verdict reported on the watched transaction, if any. */
  readonly blocked: BlockedVerdict | undefined;
  /** Throws the blocked verdict, as if the handler had let it through. */
  throwIfBlocked(): void;
  /** Stops watching; the connection goes back to the pool and will carry other transactions. */
  end(): void;
}

// Keyed by the transaction's connection object: nothing to clean up if a watch is never ended.
const watches = new WeakMap<object, { blocked: BlockedVerdict | undefined }>();

/** Starts recording the blocked verdicts the projection helpers reach on `tx`. */
export function watchVersions(tx: object): VersionWatch {
  const state: { blocked: BlockedVerdict | undefined } = { blocked: undefined };
  watches.set(tx, state);
  return {
    get blocked() {
      return state.blocked;
    },
    throwIfBlocked() {
      if (state.blocked) throw state.blocked;
    },
    end() {
      if (watches.get(tx) === state) watches.delete(tx);
    },
  };
}

/** Records `verdict` on the watch of `tx` (if the consumer watches it) and returns it, to be thrown. */
export function reportBlocked<V extends BlockedVerdict>(tx: object, verdict: V): V {
  const state = watches.get(tx);
  if (state) state.blocked ??= verdict;
  return verdict;
}
