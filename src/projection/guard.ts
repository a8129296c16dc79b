import {
  ConfigError,
  type NoRowsWrittenError,
  type StaleVersionError,
  type VersionGapError,
} from '../runtime/errors.js';
import { DEFAULT_SCHEMA } from '../runtime/defaults.js';
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

interface WatchState {
  blocked: BlockedVerdict | undefined;
  schema: string | undefined;
}

// Keyed by the transaction's connection object: nothing to clean up if a watch is never ended.
const watches = new WeakMap<object, WatchState>();

/**
 * Starts recording the blocked verdicts the projection helpers reach on `tx`. With `schema` (the
 * consumer's), helpers called on `tx` without one use it, and one naming another is refused.
 */
export function watchVersions(tx: object, schema?: string): VersionWatch {
  const state: WatchState = { blocked: undefined, schema };
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

/**
 * The schema a projection helper writes its versions to. On a transaction a consumer watches, it is
 * the consumer's: the inbox row and the version row must commit side by side, and a version kept
 * in another schema would be invisible to every later event of this consumer.
 */
export function projectionSchema(tx: object, given: string | undefined): string {
  const watched = watches.get(tx)?.schema;
  if (watched !== undefined && given !== undefined && given !== watched)
    throw new ConfigError(
      'schema',
      "a projection inside a handler is versioned in its consumer's schema; leave schema out",
    );
  return given ?? watched ?? DEFAULT_SCHEMA;
}
