/**
 * `npm run chaos -- --pg failover`: the whole run (producers, relays, consumers, the injector and
 * the final check) uses a PostgreSQL primary with a synchronous streaming standby of the run's own
 * (kit/pg-pair.ts), always through the pair's host list
 * (`postgres://…@127.0.0.1:P1,127.0.0.1:P2/postgres?target_session_attrs=read-write`), so each new
 * connection lands on whichever server accepts writes now. One more fault, pg-failover, crashes the
 * primary (immediate: no shutdown checkpoint, sessions cut) and promotes the standby.
 *
 * It happens at most once per run: the pair cannot fail back (the crashed primary is not turned into
 * a standby of the new one), so after it the run goes on with one server and no standby. With
 * synchronous replication every transaction whose COMMIT returned is on the standby before the
 * client hears of it, so the usual check (nothing lost, nothing applied twice) holds across it.
 */
import { PgPair } from '../kit/pg-pair.js';
import { queryOnce } from '../kit/services.js';
import type { PgMode } from './pg-faults.js';
import { between, type FaultKind } from './schedule.js';

export const FAILOVER_FAULTS = ['pg-failover'] as const satisfies readonly FaultKind[];
export type FailoverFault = (typeof FAILOVER_FAULTS)[number];

export const isFailoverFault = (kind: FaultKind): kind is FailoverFault =>
  (FAILOVER_FAULTS as readonly FaultKind[]).includes(kind);

/**
 * After the promotion, no other fault for this long: every worker has to notice its connections are
 * gone, find no writable server, back off and look again. A fault in that window would only test the
 * backoff twice; after it, the faults test the new primary.
 */
export const QUIET_AFTER_FAILOVER_MS = 5_000;
/** How long a CDC run waits for the standby to hold a usable copy of the failover slot before the crash. */
const SLOT_SYNC_MS = 60_000;

export class FailoverFaults {
  readonly pair: PgPair | undefined;
  #failedOver = false;

  private constructor(pair: PgPair | undefined) {
    this.pair = pair;
  }

  /** In failover mode, a synchronous pair of the run's own; otherwise nothing. */
  static async start(mode: PgMode, log: (message: string) => void): Promise<FailoverFaults> {
    if (mode !== 'failover') return new FailoverFaults(undefined);
    const started = Date.now();
    // signals: false: the run's own SIGINT/SIGTERM handler cleans up and stops the pair with the rest.
    const pair = await PgPair.start({ synchronous: true, signals: false });
    log(
      `PostgreSQL ${pair.major} pair up in ${Date.now() - started} ms: primary :${pair.ports.primary}, synchronous standby :${pair.ports.standby}`,
    );
    return new FailoverFaults(pair);
  }

  /** The host list every connection of the run uses; undefined outside failover mode. */
  get url(): string | undefined {
    return this.pair?.multiHostUrl;
  }

  get failedOver(): boolean {
    return this.#failedOver;
  }

  /**
   * Crashes the primary, leaves no writable server for 0.2–2 s (connections are refused by one node
   * and read-only on the other, so every client backs off), promotes the standby and then keeps
   * quiet for QUIET_AFTER_FAILOVER_MS. `slot`: a CDC run's failover slot, which the standby must hold
   * as a synchronised, persistent copy first, or the relays would have nothing to resume from.
   */
  async inject(
    kind: FailoverFault,
    random: () => number,
    log: (message: string) => void,
    slot?: string,
  ): Promise<void> {
    if (!this.pair) throw new Error(`${kind} needs --pg failover`);
    // The schedule draws it once; this guards the pair against any other caller.
    if (this.#failedOver) throw new Error(`${kind}: the pair failed over already and cannot fail back`);
    if (slot !== undefined) await this.#waitSlotSynced(slot, log);
    const downMs = between(random, 200, 2_000);
    // Set before the crash: a failover that fails half-way has still used up the standby.
    this.#failedOver = true;
    const started = Date.now();
    await this.pair.failPrimary('immediate');
    const crashed = Date.now();
    await new Promise((resolve) => setTimeout(resolve, downMs));
    await this.pair.promoteStandby();
    log(
      `${kind}: primary :${this.pair.ports.primary} crashed in ${crashed - started} ms, standby :${this.pair.ports.standby} promoted; no writable server for ${Date.now() - crashed} ms (${downMs} ms on purpose); quiet for ${QUIET_AFTER_FAILOVER_MS} ms`,
    );
    await new Promise((resolve) => setTimeout(resolve, QUIET_AFTER_FAILOVER_MS));
  }

  /** For a run that did not settle: which node answers, and whether it is in recovery. */
  async describe(): Promise<string[]> {
    if (!this.pair) return [];
    const nodes = [
      ['primary', this.pair.primaryUrl],
      ['standby', this.pair.standbyUrl],
    ] as const;
    return Promise.all(
      nodes.map(async ([name, url]) => {
        try {
          const [row] = await queryOnce<{ recovery: boolean }>(url, 'SELECT pg_is_in_recovery() AS recovery');
          return `pair ${name} node: up, ${row?.recovery ? 'in recovery (read-only)' : 'accepting writes'}`;
        } catch (err) {
          return `pair ${name} node: ${(err as Error).message}`;
        }
      }),
    );
  }

  async stop(): Promise<void> {
    await this.pair?.stop();
  }

  async #waitSlotSynced(slot: string, log: (message: string) => void): Promise<void> {
    const started = Date.now();
    const deadline = started + SLOT_SYNC_MS;
    let last = 'not on the standby';
    while (Date.now() < deadline) {
      const [row] = await queryOnce<{ synced: boolean; temporary: boolean }>(
        this.pair!.standbyUrl,
        'SELECT synced, temporary FROM pg_replication_slots WHERE slot_name = $1',
        [slot],
      ).catch(() => []);
      // A temporary synced slot is dropped at promotion: only a persistent one carries over.
      if (row?.synced && !row.temporary) {
        // Early in a run the sync worker may not have copied the slot yet: worth seeing how long that took.
        if (Date.now() - started > 500)
          log(`pg-failover: slot ${slot} synced on the standby after ${Date.now() - started} ms`);
        return;
      }
      last = row ? `synced=${row.synced} temporary=${row.temporary}` : 'not on the standby';
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    log(`pg-failover: slot ${slot} still ${last} on the standby after ${SLOT_SYNC_MS} ms; failing over anyway`);
  }
}
