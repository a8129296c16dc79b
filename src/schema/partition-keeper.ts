import type pg from 'pg';
import { describeError, type Logger } from '../runtime/logger.js';
import type { SchemaRef } from '../runtime/identifier.js';
import { ensurePartitions, readPartitionLayout } from './partitioning.js';

/** How often a schema that is not partitioned is looked at again (it may be converted while relays run). */
const UNPARTITIONED_RECHECK_MS = 600_000;
/** At most this long between two checks of a partitioned schema, however long its interval. */
const MAX_CHECK_MS = 300_000;
const RETRY_AFTER_FAILURE_MS = 30_000;

/**
 * Keeps the partitions of a partitioned schema created ahead from a running relay, so nobody has
 * to remember `converge maintain`: checked a few times per interval, in the background, never
 * failing the relay. A failure (say, a role that may not create tables) is logged and retried;
 * `converge status` reports the partition that is still missing.
 */
export class PartitionKeeper {
  #nextAt = 0;
  #running: Promise<void> | undefined;

  constructor(
    private readonly pool: pg.Pool,
    private readonly schema: SchemaRef,
    private readonly logger: Logger,
  ) {}

  /** Starts a check if one is due and none runs; resolves at once. */
  tick(nowMs = Date.now()): void {
    if (this.#running !== undefined || nowMs < this.#nextAt) return;
    this.#running = this.#check(nowMs).finally(() => (this.#running = undefined));
  }

  /** Waits for a check in progress (on stop, before the pool closes). */
  async settled(): Promise<void> {
    await this.#running;
  }

  async #check(nowMs: number): Promise<void> {
    try {
      const layouts = await readPartitionLayout(this.pool, this.schema);
      if (layouts.length === 0) {
        this.#nextAt = nowMs + UNPARTITIONED_RECHECK_MS;
        return;
      }
      const created = await ensurePartitions(this.pool, this.schema);
      if (created.length > 0)
        this.logger.info({ schema: this.schema.name, partitions: created }, 'created partitions ahead');
      const shortest = Math.min(...layouts.map((layout) => layout.intervalMs));
      this.#nextAt = nowMs + Math.min(shortest / 4, MAX_CHECK_MS);
    } catch (err) {
      this.logger.warn(
        { schema: this.schema.name, ...describeError(err) },
        'could not create partitions ahead; will retry (converge status shows how far ahead they reach)',
      );
      this.#nextAt = nowMs + RETRY_AFTER_FAILURE_MS;
    }
  }
}
