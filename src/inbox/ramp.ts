/**
 * After an outage the backlog is waiting; processing all of it at full speed at once can
 * exhaust the database's connections and locks again. The consumer instead starts at a low
 * rate and multiplies it step by step until it no longer limits anything.
 */
export interface RampUpPolicy {
  /** Events per second right after the outage. Default 100. */
  initialPerSecond: number;
  /** Multiplier per step. Default 2. */
  factor: number;
  /** Step length in ms. Default 1,000. */
  stepMs: number;
  /** Once the limit reaches this rate it is lifted. Default 10,000. */
  untilPerSecond: number;
}

export const DEFAULT_RAMP_UP: RampUpPolicy = {
  initialPerSecond: 100,
  factor: 2,
  stepMs: 1_000,
  untilPerSecond: 10_000,
};

/** The rate allowed `elapsedMs` after recovery began; null once the ramp is over. */
export function rampLimit(elapsedMs: number, policy: RampUpPolicy): number | null {
  const steps = Math.floor(Math.max(0, elapsedMs) / policy.stepMs);
  const rate = policy.initialPerSecond * policy.factor ** steps;
  return rate >= policy.untilPerSecond || !Number.isFinite(rate) ? null : rate;
}

/**
 * A token bucket whose rate follows the ramp. Its burst is a tenth of a second of the
 * current rate, so the rate holds over any interval: at most burst + rate × seconds events.
 */
export class RampGate {
  #startedAt: number | null = null;
  #tokens = 0;
  #refilledAt = 0;
  readonly #policy: RampUpPolicy;
  readonly #now: () => number;

  constructor(policy: RampUpPolicy, now: () => number = () => performance.now()) {
    this.#policy = policy;
    this.#now = now;
  }

  /** Starts (or restarts) the ramp from the initial rate. */
  begin(): void {
    this.#startedAt = this.#now();
    this.#refilledAt = this.#startedAt;
    this.#tokens = burst(this.#policy.initialPerSecond);
  }

  /** The current limit in events per second, or null when not ramping. */
  limit(): number | null {
    if (this.#startedAt === null) return null;
    const rate = rampLimit(this.#now() - this.#startedAt, this.#policy);
    if (rate === null) this.#startedAt = null;
    return rate;
  }

  /**
   * How many of `wanted` events may go now (0 to `wanted`), and if none, how long to wait
   * for the next one. Not ramping: all of them.
   */
  take(wanted: number): { granted: number; waitMs: number } {
    const rate = this.limit();
    if (rate === null) return { granted: wanted, waitMs: 0 };
    const now = this.#now();
    this.#tokens = Math.min(burst(rate), this.#tokens + ((now - this.#refilledAt) / 1000) * rate);
    this.#refilledAt = now;
    const granted = Math.min(wanted, Math.floor(this.#tokens));
    if (granted > 0) {
      this.#tokens -= granted;
      return { granted, waitMs: 0 };
    }
    return { granted: 0, waitMs: Math.ceil(((1 - this.#tokens) / rate) * 1000) };
  }
}

function burst(rate: number): number {
  return Math.max(1, rate / 10);
}

/**
 * A consumer's admission of batches while recovering: waits for the gate, and reports each
 * change of the limit once (a number while ramping, null once lifted).
 */
export class RampAdmission {
  readonly #gate: RampGate;
  readonly #onChange: (limit: number | null) => void;
  #reported: number | null = null;

  constructor(gate: RampGate, onChange: (limit: number | null) => void) {
    this.#gate = gate;
    this.#onChange = onChange;
  }

  /** Starts (or restarts) the ramp: after a new broker session, or when the database comes back. */
  begin(): void {
    this.#gate.begin();
    this.#report();
  }

  /** How many deliveries the next transaction may take (at least one), waiting for the gate if none may go now. */
  async admit(wanted: number): Promise<number> {
    for (;;) {
      const { granted, waitMs } = this.#gate.take(wanted);
      this.#report();
      if (granted > 0) return granted;
      await new Promise((resolve) => setTimeout(resolve, waitMs));
    }
  }

  #report(): void {
    const limit = this.#gate.limit();
    if (limit === this.#reported) return;
    this.#reported = limit;
    this.#onChange(limit);
  }
}
