export interface BackoffPolicy {
  /** Delay before the first retry, in ms. */
  initialDelayMs: number;
  /** Upper bound of any single delay, in ms. */
  maxDelayMs: number;
  /** Growth per attempt. */
  factor: number;
}

export const DEFAULT_BACKOFF: BackoffPolicy = { initialDelayMs: 200, maxDelayMs: 30_000, factor: 2 };

/**
 * Bounded exponential backoff with "equal jitter": half of the capped delay is fixed and
 * half random, so retries spread out but never collapse to zero. `attempt` counts from 1.
 * `random` is injectable so the function stays deterministic under test.
 */
export function backoffDelay(
  attempt: number,
  policy: BackoffPolicy = DEFAULT_BACKOFF,
  random: () => number = Math.random,
): number {
  const exponent = Math.max(0, Math.min(attempt - 1, 60));
  const capped = Math.min(policy.maxDelayMs, policy.initialDelayMs * policy.factor ** exponent);
  const half = capped / 2;
  return Math.round(half + half * Math.min(Math.max(random(), 0), 1));
}
