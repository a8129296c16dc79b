/**
 * Samples the pipeline every `intervalMs`, one sample at a time (the next is scheduled when
 * the previous settled, so a slow database never piles reads up), keeping the latest status
 * for the page and a point per sample in the ring for the charts.
 */
import type pg from 'pg';
import { readPipelineStatus, type PipelineStatus, type PipelineStatusOptions } from '../ops/index.js';
import { describeError, type Logger } from '../runtime/logger.js';
import { historyPoint, Ring, type HistoryPoint } from './history.js';

export interface Sampler {
  /** The newest status, or null before the first sample succeeded. */
  latest(): PipelineStatus | null;
  /** The last sample's failure (class and code only), or null after a success. */
  error(): string | null;
  history(): HistoryPoint[];
  /** Stops the timer and waits for a sample in flight. */
  stop(): Promise<void>;
}

export function startSampler(
  pool: pg.Pool,
  status: PipelineStatusOptions,
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
      latest = await readPipelineStatus(pool, status);
      failure = null;
      ring.push(historyPoint(latest));
    } catch (err) {
      const described = describeError(err);
      // Log a change of state only, not every failed tick of an outage.
      if (failure === null) logger.warn(described, 'dashboard: sampling the pipeline failed');
      failure = [described.err, described.code].filter(Boolean).join(' ');
    }
  };
  const tick = () => {
    inFlight = sample().then(() => {
      if (!stopped) timer = setTimeout(tick, intervalMs);
    });
  };
  tick();

  return {
    latest: () => latest,
    error: () => failure,
    history: () => ring.toArray(),
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await inFlight;
      clearTimeout(timer);
    },
  };
}
