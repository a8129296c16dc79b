/**
 * Samples the pipeline every `intervalMs`, one sample at a time (the next is scheduled when
 * the previous settled, so a slow database never piles reads up), keeping the latest status
 * for the page and a point per sample in the ring for the charts. `refresh()` takes a sample
 * now, queued behind any in flight, so an action's effect shows without waiting for the timer.
 */
import type { PipelineStatus } from '../ops/index.js';
import { describeError, type Logger } from '../runtime/logger.js';
import { historyPoint, Ring, type HistoryPoint } from './history.js';

export interface Sampler {
  /** The newest status, or null before the first sample succeeded. */
  latest(): PipelineStatus | null;
  /** The last sample's failure (class and code only), or null after a success. */
  error(): string | null;
  history(): HistoryPoint[];
  /** Takes a sample after any in flight and resolves once it settled; the interval restarts from it. */
  refresh(): Promise<void>;
  /** Stops the timer and waits for a sample in flight. */
  stop(): Promise<void>;
}

/** `read` is readPipelineStatus bound to the dashboard's pool and options. */
export function startSampler(
  read: () => Promise<PipelineStatus>,
  intervalMs: number,
  capacity: number,
  logger: Logger,
): Sampler {
  const ring = new Ring<HistoryPoint>(capacity);
  let latest: PipelineStatus | null = null;
  let failure: string | null = null;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  let inFlight: Promise<void> = Promise.resolve();

  const sample = async () => {
    try {
      latest = await read();
      failure = null;
      ring.push(historyPoint(latest));
    } catch (err) {
      const described = describeError(err);
      // Log a change of state only, not every failed tick of an outage.
      if (failure === null) logger.warn(described, 'dashboard: sampling the pipeline failed');
      failure = [described.err, described.code].filter(Boolean).join(' ');
    }
  };
  // Timer ticks and refreshes share one chain, so two reads never overlap and a late read never
  // overwrites a newer one. A run cancels the pending tick when it starts (runs are serial, so
  // none is armed again before it settles) and arms one: a refresh replaces the next tick.
  const run = (): Promise<void> => {
    inFlight = inFlight.then(async () => {
      clearTimeout(timer);
      if (stopped) return;
      await sample();
      if (!stopped) timer = setTimeout(() => void run(), intervalMs);
    });
    return inFlight;
  };
  void run();

  return {
    latest: () => latest,
    error: () => failure,
    history: () => ring.toArray(),
    refresh: run,
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await inFlight;
      clearTimeout(timer);
    },
  };
}
