/**
 * What a chaos producer may count. A transaction whose COMMIT returned is committed. One that failed
 * before its COMMIT was sent rolled back whole. One whose COMMIT was sent and whose answer was lost
 * (the primary crashed under it) is in doubt: it committed or not, and only the server that accepts
 * writes now can say which. The producer asks it, and counts the event only on a yes; while no
 * server answers it keeps asking, and at the deadline it counts nothing (never a maybe).
 */

export type Outcome =
  /** The COMMIT returned. */
  | 'committed'
  /** Failed before the event was written: nothing was sent to commit. */
  | 'rolled-back'
  /** The COMMIT failed; the writable server has the event. */
  | 'in-doubt-there'
  /** The COMMIT failed; the writable server does not have the event. */
  | 'in-doubt-absent'
  /** The COMMIT failed and no server answered before the deadline. */
  | 'in-doubt-unknown';

export interface Counted {
  outcome: Outcome;
  /** The event to count as produced: set only when it is known to be committed. */
  eventId?: string;
  /** The transaction's error, when it failed. */
  error?: unknown;
}

export interface AskOptions {
  /** Whether the writable server has `eventId`; rejects while none answers. */
  present: (eventId: string) => Promise<boolean>;
  /** How long to keep asking (a failover leaves no writable server for a few seconds). */
  timeoutMs: number;
  retryMs: number;
  now?: () => number;
  sleep?: (ms: number) => Promise<unknown>;
}

/**
 * Runs `transaction`, which calls `written(eventId)` once its event is in the transaction (the
 * statement returned) and resolves when its COMMIT did; tells what of it may be counted.
 */
export async function countedCommit(
  transaction: (written: (eventId: string) => void) => Promise<unknown>,
  ask: AskOptions,
): Promise<Counted> {
  let eventId: string | undefined;
  try {
    await transaction((id) => (eventId = id));
  } catch (error) {
    // The write itself failed, or something before it: no COMMIT carried the event.
    if (eventId === undefined) return { outcome: 'rolled-back', error };
    const answer = await presentOnWritable(eventId, ask);
    if (answer === true) return { outcome: 'in-doubt-there', eventId, error };
    return { outcome: answer === false ? 'in-doubt-absent' : 'in-doubt-unknown', error };
  }
  if (eventId === undefined) throw new Error('the transaction committed without writing its event');
  return { outcome: 'committed', eventId };
}

/** true or false as the writable server answers; undefined when none did within the timeout. */
async function presentOnWritable(eventId: string, ask: AskOptions): Promise<boolean | undefined> {
  const now = ask.now ?? Date.now;
  const sleep = ask.sleep ?? ((ms: number) => new Promise((resolve) => setTimeout(resolve, ms)));
  const deadline = now() + ask.timeoutMs;
  for (;;) {
    try {
      return await ask.present(eventId);
    } catch {
      if (now() >= deadline) return undefined;
      await sleep(ask.retryMs);
    }
  }
}
