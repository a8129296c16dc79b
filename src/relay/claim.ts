import type pg from 'pg';
import { runStatement } from '../db/statement.js';
import type { Logger } from '../runtime/logger.js';
import { isRowRefused } from '../runtime/row-refused.js';
import { ClaimFloor, type ClaimScan } from './claim-floor.js';
import { setAside, type SetAsideContext } from './set-aside.js';
import type { ResolvedRelayOptions } from './options.js';
import type { ClaimedRow, relaySql } from './sql.js';

/**
 * How a relay takes rows to publish. `claim` returns the rows, or 'standby' when another relay
 * holds the right to claim; `settled` says the batch's rows are marked or rescheduled.
 */
export interface Claimer {
  /** Fences the relay's marks and reschedules (outcomes.ts): its claimed_by, or null. */
  readonly owner: string | null;
  claim(): Promise<ClaimedRow[] | 'standby'>;
  settled(rows: ClaimedRow[]): void;
  close(): Promise<void>;
}

interface ClaimerContext {
  pool: pg.Pool;
  /** Where a session lasts (the exclusive claim's lock): the pool itself, or a direct one beside a pooler. */
  sessionPool: pg.Pool | undefined;
  sql: ReturnType<typeof relaySql>;
  options: ResolvedRelayOptions;
  /** The exclusive claimer took the lock (true) or found it held by another relay (false). */
  ownership: (owned: boolean) => void;
  /** Where rows the table refuses go (set-aside.ts); its owner is this claimer's. */
  setAside: SetAsideContext;
}

export function createClaimer(ctx: ClaimerContext): Claimer {
  return ctx.options.claim === 'exclusive' ? new ExclusiveClaimer(ctx) : new LeaseClaimer(ctx);
}

/** Writes the claim into each row (claimed_by and a lease) in a short transaction of its own. */
class LeaseClaimer implements Claimer {
  readonly owner: string;
  readonly #floor = new ClaimFloor();

  constructor(private readonly ctx: ClaimerContext) {
    this.owner = ctx.options.relayId;
  }

  async claim(): Promise<ClaimedRow[]> {
    const startedAt = performance.now();
    const scan = this.#floor.next(startedAt);
    const excluded = this.ctx.setAside.skipped.excluded(startedAt);
    let rows: ClaimedRow[];
    try {
      rows = await this.#claim(this.ctx.options.batchSize, excluded, null, scan);
    } catch (err) {
      // Writing the lease is an UPDATE, checked against every rule of the table (NOT VALID ones
      // too): one refused row would fail the claim of all others, so they are claimed one by one.
      if (!isRowRefused(err)) throw err;
      rows = await this.#claimEach(excluded, scan);
    }
    this.#floor.observed(rows[0]?.lowest_pending ?? null, scan, startedAt, performance.now());
    return rows;
  }

  async #claim(limit: number, excluded: string[], only: string | null, scan: ClaimScan): Promise<ClaimedRow[]> {
    const { options } = this.ctx;
    const { rows } = await runStatement<ClaimedRow>(this.ctx.pool, this.ctx.sql.claim, [
      this.owner,
      limit,
      options.leaseMs,
      excluded,
      only,
      scan.floor,
    ]);
    return rows;
  }

  async #claimEach(excluded: string[], scan: ClaimScan): Promise<ClaimedRow[]> {
    const { rows: candidates } = await runStatement<{ position: string }>(this.ctx.pool, this.ctx.sql.claimCandidates, [
      this.ctx.options.batchSize,
      excluded,
      scan.floor,
    ]);
    const claimed: ClaimedRow[] = [];
    for (const { position } of candidates) {
      try {
        claimed.push(...(await this.#claim(1, excluded, position, scan)));
      } catch (err) {
        if (!isRowRefused(err)) throw err;
        await setAside(this.ctx.setAside, position, err);
      }
    }
    return claimed;
  }

  settled(): void {}

  async close(): Promise<void> {}
}

/**
 * Claims by reading, which is safe only because no other exclusive relay reads at the same time:
 * the rows are selected on the connection that holds the schema's relay lock, so a relay that lost
 * the lock (its connection ended) cannot select again. What its batches already sent is marked
 * through the pool: a confirmed event marked published is true whoever marks it, and one that is
 * also re-published by the new holder is a duplicate, never a loss. The rows of its own batches
 * still waiting for confirms are left out by position until they are marked or rescheduled.
 */
class ExclusiveClaimer implements Claimer {
  readonly owner = null;
  #holder: pg.PoolClient | undefined;
  #owned: boolean | undefined;
  /**
   * The listener on the checked-out client, removed before it goes back to the pool: a standby
   * takes a client every standbyRetryMs, and listeners left behind would pile up on it for good.
   */
  #onError: ((err: Error) => void) | undefined;
  readonly #inFlight = new Set<string>();
  readonly #floor = new ClaimFloor();

  constructor(private readonly ctx: ClaimerContext) {}

  async claim(): Promise<ClaimedRow[] | 'standby'> {
    const holder = this.#holder ?? (await this.#takeLock());
    if (!holder) return 'standby';
    try {
      const startedAt = performance.now();
      const scan = this.#floor.next(startedAt);
      const { rows } = await runStatement<ClaimedRow>(holder, this.ctx.sql.selectDue, [
        this.ctx.options.batchSize,
        [...this.#inFlight, ...this.ctx.setAside.skipped.excluded(startedAt)],
        scan.floor,
      ]);
      for (const row of rows) this.#inFlight.add(row.position);
      this.#floor.observed(rows[0]?.lowest_pending ?? null, scan, startedAt, performance.now());
      return rows;
    } catch (err) {
      this.#drop(holder, err);
      throw err;
    }
  }

  settled(rows: ClaimedRow[]): void {
    for (const row of rows) this.#inFlight.delete(row.position);
  }

  async close(): Promise<void> {
    const holder = this.#holder;
    if (!holder) return;
    this.#holder = undefined;
    // A pool given by the user keeps the connection: it must not keep the lock with it.
    try {
      await holder.query(this.ctx.sql.disown, [this.ctx.options.schema]);
      await holder.query(this.ctx.sql.idleLimitReset).catch(() => undefined);
      this.#release(holder);
    } catch (err) {
      this.#release(holder, err as Error);
    }
  }

  async #takeLock(): Promise<pg.PoolClient | undefined> {
    // The options refuse claim exclusive where no session lasts.
    const client = await (this.ctx.sessionPool ?? this.ctx.pool).connect();
    // A checked-out client with no 'error' listener would crash the process when its server goes away.
    this.#onError = (err) => this.#drop(client, err);
    client.on('error', this.#onError);
    let owned: boolean;
    try {
      const { rows } = await client.query<{ owned: boolean }>(this.ctx.sql.tryOwn, [this.ctx.options.schema]);
      owned = rows[0]?.owned === true;
    } catch (err) {
      this.#release(client, err as Error);
      throw err;
    }
    if (!owned) this.#release(client);
    else {
      this.#holder = client;
      await this.#limitIdle(client);
    }
    if (owned !== this.#owned) this.ctx.ownership(owned);
    this.#owned = owned;
    return owned ? client : undefined;
  }

  async #limitIdle(client: pg.PoolClient): Promise<void> {
    try {
      await client.query(this.ctx.sql.idleLimit, [String(this.ctx.options.leaseMs)]);
    } catch (err) {
      // PostgreSQL before 14 has no idle_session_timeout: the lock then lasts until TCP keepalive ends the session.
      if ((err as { code?: string }).code !== UNDEFINED_PARAMETER) {
        this.#drop(client, err);
        throw err;
      }
    }
  }

  /** The lock went with the connection (or will, as it is destroyed): claim nothing more on it. */
  #drop(client: pg.PoolClient, err: unknown): void {
    if (this.#holder !== client) return;
    this.#holder = undefined;
    this.#owned = undefined;
    // The destroyed client may still report its socket's end, when this claimer no longer listens.
    client.on('error', () => {});
    this.#release(client, err instanceof Error ? err : new Error(String(err)));
    logLost(this.ctx.options.logger, this.ctx.options.relayId);
  }

  /** Back to the pool (or destroyed, with `err`) without this claimer's listener. */
  #release(client: pg.PoolClient, err?: Error): void {
    if (this.#onError) client.off('error', this.#onError);
    this.#onError = undefined;
    client.release(err);
  }
}

const UNDEFINED_PARAMETER = '42704';

function logLost(logger: Logger, relayId: string): void {
  logger.warn({ relayId }, 'lost the connection holding the relay lock: claiming stops until it is taken again');
}
