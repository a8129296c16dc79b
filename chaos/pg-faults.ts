/**
 * PostgreSQL restarts in the chaos run. The shared server (127.0.0.1:5432) is never restarted:
 * with `--pg embedded` the whole run (producers, relays, consumers, the check) uses a
 * PostgreSQL of its own (kit/embedded-postgres.ts), and only then are the PG faults in the
 * default fault list. Naming a PG fault in `--faults` selects the embedded server too. `--pg pooler`
 * (chaos/pooler-faults.ts) is the third mode: the shared server behind a PgBouncer of the run's own.
 * `--pg failover` (chaos/failover-faults.ts) the fourth: a synchronous primary/standby pair of the
 * run's own, reached through a host list, whose primary crashes once and whose standby is promoted.
 */
import { EmbeddedPostgres } from '../kit/embedded-postgres.js';
import { isFailoverFault } from './failover-faults.js';
import { CDC_THROUGH_POOLER, isPoolerFault } from './pooler-faults.js';
import { between, type FaultKind } from './schedule.js';

export const PG_FAULTS = ['pg-restart-fast', 'pg-restart-immediate'] as const satisfies readonly FaultKind[];
export type PgFault = (typeof PG_FAULTS)[number];

export const isPgFault = (kind: FaultKind): kind is PgFault => (PG_FAULTS as readonly FaultKind[]).includes(kind);

/**
 * shared: the usual server, never restarted. embedded: a PostgreSQL of the run's own, with PG restart
 * faults. pooler: the usual server, the workers reaching it through a PgBouncer of the run's own
 * (chaos/pooler-faults.ts), with the pooler's restart as a fault. failover: a synchronous pair of the
 * run's own (chaos/failover-faults.ts), everything on its host list, with one failover as a fault.
 */
export type PgMode = 'shared' | 'embedded' | 'pooler' | 'failover';

const PG_MODES: readonly PgMode[] = ['shared', 'embedded', 'pooler', 'failover'];

/** Which fault needs which mode, for the errors that name it. */
const NEEDS: Record<Exclude<PgMode, 'shared'>, string> = {
  embedded: 'PG restart faults need --pg embedded',
  pooler: 'pooler faults need --pg pooler',
  failover: 'pg-failover needs --pg failover',
};

/**
 * `--pg` as given, or the mode a fault named in `--faults` needs: embedded for a PG restart, pooler
 * for the pooler's, failover for pg-failover. One mode per run, so asking for two kinds is an error,
 * not a silent choice; so is --relay cdc with embedded or pooler (its relays stream from
 * CDC_DATABASE_URL, over a replication connection). A failover run takes CDC relays: the pair has
 * wal_level=logical, and their slot is created as a failover slot the standby keeps.
 */
export function pgMode(
  flag: string | undefined,
  chosen: readonly FaultKind[] | undefined,
  relayMode: 'polling' | 'exclusive' | 'cdc' = 'polling',
): PgMode {
  if (flag !== undefined && !PG_MODES.some((mode) => mode === flag))
    throw new Error(`--pg must be ${PG_MODES.join(', ')}, not ${flag}`);
  const wanted = {
    embedded: flag === 'embedded' || chosen?.some(isPgFault) === true,
    pooler: flag === 'pooler' || chosen?.some(isPoolerFault) === true,
    failover: flag === 'failover' || chosen?.some(isFailoverFault) === true,
  };
  const modes = (Object.keys(wanted) as (keyof typeof wanted)[]).filter((mode) => wanted[mode]);
  if (modes.length > 1)
    throw new Error(`${modes.map((mode) => NEEDS[mode]).join(' and ')}: one --pg mode per run, so not both`);
  const mode = modes[0] ?? 'shared';
  if (flag === 'shared' && mode !== 'shared')
    throw new Error(`${NEEDS[mode]}: the shared server and the shared pooler are never restarted`);
  if (relayMode === 'cdc' && mode === 'embedded')
    throw new Error('--relay cdc runs on CDC_DATABASE_URL (wal_level=logical); PG restart faults need --pg embedded');
  if (relayMode === 'cdc' && mode === 'pooler') throw new Error(CDC_THROUGH_POOLER);
  return mode;
}

/**
 * Whether a run in `mode` may draw `kind`: a PG restart only on its own server, a pooler restart only
 * on its own pooler, a failover only on its own pair.
 */
export function drawableIn(mode: PgMode, kind: FaultKind): boolean {
  if (isPgFault(kind)) return mode === 'embedded';
  if (isPoolerFault(kind)) return mode === 'pooler';
  if (isFailoverFault(kind)) return mode === 'failover';
  return true;
}

/** Keeps a restart from following the last one before the pipeline had a few seconds to catch up. */
const QUIET_AFTER_RESTART_MS = 5_000;

export class PgFaults {
  readonly server: EmbeddedPostgres | undefined;
  #restartedAt = 0;

  private constructor(server: EmbeddedPostgres | undefined) {
    this.server = server;
  }

  static async start(mode: PgMode): Promise<PgFaults> {
    return new PgFaults(mode === 'embedded' ? await EmbeddedPostgres.start() : undefined);
  }

  /** PG faults the schedule should hold back for now. */
  deferred(): FaultKind[] {
    return Date.now() - this.#restartedAt < QUIET_AFTER_RESTART_MS ? [...PG_FAULTS] : [];
  }

  /**
   * fast: every session ends (57P01), in-flight transactions roll back, a checkpoint, a clean
   * start. immediate: a crash; committed work comes back by WAL replay. Down for 0.2–2 s either
   * way, so connection attempts are refused for a while, not only reset.
   */
  async inject(kind: PgFault, random: () => number, log: (message: string) => void): Promise<void> {
    if (!this.server) throw new Error(`${kind} needs --pg embedded`);
    const downMs = between(random, 200, 2_000);
    const started = Date.now();
    try {
      await this.server.restart(kind === 'pg-restart-fast' ? 'fast' : 'immediate', downMs);
    } finally {
      this.#restartedAt = Date.now();
    }
    log(`${kind}: PostgreSQL back after ${Date.now() - started} ms (down ${downMs} ms on purpose)`);
  }

  async stop(): Promise<void> {
    await this.server?.stop();
  }
}
