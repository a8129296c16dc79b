/**
 * PostgreSQL restarts in the chaos run. The shared server (127.0.0.1:5432) is never restarted:
 * with `--pg embedded` the whole run (producers, relays, consumers, the check) uses a
 * PostgreSQL of its own (kit/embedded-postgres.ts), and only then are the PG faults in the
 * default fault list. Naming a PG fault in `--faults` selects the embedded server too.
 */
import { EmbeddedPostgres } from '../kit/embedded-postgres.js';
import { between, type FaultKind } from './schedule.js';

export const PG_FAULTS = ['pg-restart-fast', 'pg-restart-immediate'] as const satisfies readonly FaultKind[];
export type PgFault = (typeof PG_FAULTS)[number];

export const isPgFault = (kind: FaultKind): kind is PgFault => (PG_FAULTS as readonly FaultKind[]).includes(kind);

export type PgMode = 'shared' | 'embedded';

/** `--pg` as given, or embedded when a PG fault was asked for by name. */
export function pgMode(flag: string | undefined, chosen: readonly FaultKind[] | undefined): PgMode {
  if (flag !== undefined && flag !== 'shared' && flag !== 'embedded')
    throw new Error(`--pg must be shared or embedded, not ${flag}`);
  if (flag === 'embedded' || chosen?.some(isPgFault)) {
    if (flag === 'shared')
      throw new Error('PG restart faults need --pg embedded: the shared server is never restarted');
    return 'embedded';
  }
  return 'shared';
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
