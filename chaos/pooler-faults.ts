/**
 * `npm run chaos -- --pg pooler`: the relays and consumers reach PostgreSQL through a PgBouncer in
 * transaction pooling mode (kit/pgbouncer.ts) with `poolMode: 'transaction'`, so each of their
 * transactions may run on another server connection, and one more fault kills that PgBouncer and
 * starts it again. The producers, the injector and the final check stay on DATABASE_URL: the check
 * must not depend on the pooler it is judging.
 *
 * The run starts a PgBouncer of its own on a free port rather than restarting the one `npm run
 * services` keeps on POOLER_DATABASE_URL: that one serves the integration suite's pooler pass, which
 * may run at the same time, and a fault aimed at this run must not break another (the same reason
 * `--pg embedded` restarts a PostgreSQL of its own, never the shared one).
 */
import { readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import pg from 'pg';
import { pgBouncerDir, pgBouncerSetup, preparePgBouncer, restartPgBouncer, stopPgBouncer } from '../kit/pgbouncer.js';
import { freePort } from '../kit/ports.js';
import type { PgMode } from './pg-faults.js';
import { between, type FaultKind } from './schedule.js';
import type { WorkerConfig } from './worker.js';

export const POOLER_FAULTS = ['restart-pooler'] as const satisfies readonly FaultKind[];
export type PoolerFault = (typeof POOLER_FAULTS)[number];

export const isPoolerFault = (kind: FaultKind): kind is PoolerFault =>
  (POOLER_FAULTS as readonly FaultKind[]).includes(kind);

/** As pg-faults' restarts: the pipeline gets a few seconds to reconnect and catch up before the next one. */
const QUIET_AFTER_RESTART_MS = 5_000;
/** A killed PgBouncer's listening socket closes with the process; longer means something else holds the port. */
const PORT_FREE_MS = 5_000;

/**
 * The URL of a PgBouncer on 127.0.0.1:`port` that reaches `backendUrl`'s database as its user: the
 * pooler's [databases] entry is `*`, so the database name and the user pass through unchanged.
 */
export function poolerUrlFor(backendUrl: string, port: number): string {
  // libpq allows an empty host after credentials (postgres://user@/db?host=/socket); WHATWG URL does not.
  const url = new URL(backendUrl.replace(/@\//, '@localhost/'));
  url.hostname = '127.0.0.1';
  url.port = String(port);
  // A Unix-socket directory or another port given as a parameter would win over the authority in pg.
  url.searchParams.delete('host');
  url.searchParams.delete('port');
  return url.toString();
}

/**
 * `url` with an application_name parameter. pg lets a connection string's parameters override the
 * pool's own options, so a session converge opens itself (the relay's directConnectionString pool
 * names its connections `converge-relay`) carries the worker's name: terminate-backends finds it, and
 * the kill-relay fault finds which worker holds the relay lock.
 */
export function withApplicationName(url: string, name: string): string {
  const parsed = new URL(url);
  parsed.searchParams.set('application_name', name);
  return parsed.toString();
}

export type WorkerConnection = Pick<WorkerConfig, 'databaseUrl' | 'poolMode' | 'directUrl'>;

/**
 * How the workers connect in `mode`. Through the pooler: `poolMode: 'transaction'` (no named
 * prepared statements, no LISTEN); lease relays poll with no direct connection at all, and exclusive
 * relays get DATABASE_URL as directConnectionString, because the relay lock is a session advisory
 * lock that a transaction-mode pooler would leave on a server connection another client gets next.
 */
export function workerConnection(
  mode: PgMode,
  relayMode: WorkerConfig['relayMode'],
  urls: { direct: string; pooler: string | undefined },
): WorkerConnection {
  if (mode !== 'pooler') return { databaseUrl: urls.direct, poolMode: 'session' };
  if (urls.pooler === undefined) throw new Error('--pg pooler: the run has no PgBouncer URL');
  if (relayMode === 'cdc') throw new Error(CDC_THROUGH_POOLER);
  return {
    databaseUrl: urls.pooler,
    poolMode: 'transaction',
    ...(relayMode === 'exclusive' ? { directUrl: urls.direct } : {}),
  };
}

export const CDC_THROUGH_POOLER =
  '--relay cdc streams over a replication connection, which no transaction-mode pooler carries: --pg pooler runs polling or exclusive relays';

export class PoolerFaults {
  readonly url: string | undefined;
  readonly #backendUrl: string;
  #restartedAt = 0;

  private constructor(url: string | undefined, backendUrl: string) {
    this.url = url;
    this.#backendUrl = backendUrl;
  }

  /** In pooler mode, a PgBouncer of the run's own in front of `backendUrl`; otherwise nothing. */
  static async start(mode: PgMode, backendUrl: string, log: (message: string) => void): Promise<PoolerFaults> {
    if (mode !== 'pooler') return new PoolerFaults(undefined, backendUrl);
    const url = poolerUrlFor(backendUrl, await freePort());
    log(await preparePgBouncer(url, backendUrl));
    return new PoolerFaults(url, backendUrl);
  }

  get port(): number | undefined {
    return this.url === undefined ? undefined : pgBouncerSetup(this.url, this.url).listenPort;
  }

  /** Pooler faults the schedule should hold back for now. */
  deferred(): FaultKind[] {
    return Date.now() - this.#restartedAt < QUIET_AFTER_RESTART_MS ? [...POOLER_FAULTS] : [];
  }

  /**
   * SIGKILL, no shutdown at all: every client connection and every server connection drops at once,
   * transactions in flight roll back on PostgreSQL (or committed, their COMMIT's answer lost). Down
   * for 0.2–2 s, so the workers' reconnects are refused for a while, not only reset; then started again
   * from the config it was started with.
   */
  async inject(kind: PoolerFault, random: () => number, log: (message: string) => void): Promise<void> {
    if (!this.url) throw new Error(`${kind} needs --pg pooler`);
    const downMs = between(random, 200, 2_000);
    const started = Date.now();
    try {
      await this.#kill();
      const left = downMs - (Date.now() - started);
      if (left > 0) await new Promise((resolve) => setTimeout(resolve, left));
      await restartPgBouncer(this.url);
    } finally {
      this.#restartedAt = Date.now();
    }
    log(`${kind}: PgBouncer back after ${Date.now() - started} ms (down ${downMs} ms on purpose)`);
  }

  /** Before the wait for quiescence: a restart that failed must not leave the workers without a pooler. */
  async restore(): Promise<void> {
    if (this.url) await preparePgBouncer(this.url, this.#backendUrl);
  }

  /** The pooler's own view, for a run that did not settle: its pools and its clients' states. */
  async describe(): Promise<string[]> {
    if (!this.url) return [];
    // The admin console is the database `pgbouncer`; it answers simple queries only, which pg sends without parameters.
    const admin = new URL(this.url);
    admin.pathname = '/pgbouncer';
    const client = new pg.Client({ connectionString: admin.toString(), connectionTimeoutMillis: 5_000 });
    client.on('error', () => undefined);
    try {
      await client.connect();
      const pools = await client.query('SHOW POOLS');
      const clients = await client.query('SHOW CLIENTS');
      return [
        ...pools.rows.map((row) => `pooler pool: ${JSON.stringify(row)}`),
        ...clients.rows.map(
          (row: Record<string, unknown>) =>
            `pooler client: ${JSON.stringify({ state: row.state, application_name: row.application_name, wait: row.wait })}`,
        ),
      ];
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  async stop(): Promise<void> {
    if (!this.url) return;
    await stopPgBouncer(this.url);
    rmSync(pgBouncerDir(this.port!), { recursive: true, force: true });
  }

  async #kill(): Promise<void> {
    const setup = pgBouncerSetup(this.url!, this.url!);
    const pidFile = path.join(setup.dir, 'pgbouncer.pid');
    const pid = Number(readFileSync(pidFile, 'utf8').trim());
    if (!Number.isInteger(pid) || pid <= 0) throw new Error(`no PgBouncer pid in ${pidFile}`);
    process.kill(pid, 'SIGKILL');
    // Nobody may reap the daemon here (it was re-parented), and PgBouncer takes a zombie's pid for a
    // live one: a pidfile left behind would stop the next start with "already running".
    rmSync(pidFile, { force: true });
    const deadline = Date.now() + PORT_FREE_MS;
    while (await listening(setup.listenHost, setup.listenPort)) {
      if (Date.now() > deadline) throw new Error(`PgBouncer at ${setup.where}: port still taken after SIGKILL`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
}

function listening(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}
