import pg from 'pg';
import { sessionCheck, type HostList, type HostPort } from '../runtime/host-list.js';

/**
 * No host of a multi-host connection string gave a session of the kind asked for (a standby not
 * yet promoted answers read-only). SQLSTATE class 08, so converge treats it as the database
 * being unavailable and retries with backoff, as for a refused connection.
 */
export class NoSuitableHostError extends Error {
  readonly code = '08004';
  constructor(hosts: number, attrs: string) {
    super(
      attrs === 'any'
        ? `none of the ${hosts} hosts accepted a connection`
        : `none of the ${hosts} hosts gave a ${attrs} session`,
    );
    this.name = 'NoSuitableHostError';
  }
}

/** The host that last gave a suitable session, per host list: a new connection tries it first. */
class HostChooser {
  #preferred: HostPort | undefined;
  #lostPreferred = false;

  constructor(
    private readonly list: HostList,
    private readonly config: pg.ClientConfig,
  ) {}

  /** The preferred host, else the first that gives a suitable session to a throwaway probe. */
  async pick(): Promise<HostPort> {
    this.#preferred ??= await findSuitableHost(this.list, this.config);
    return this.#preferred;
  }

  forget(host: HostPort): void {
    if (this.#preferred !== host) return;
    this.#preferred = undefined;
    this.#lostPreferred = true;
  }

  /** The last failure dropped the host that had been good: the next connection looks at every host. Asked once. */
  lostPreferred(): boolean {
    const lost = this.#lostPreferred;
    this.#lostPreferred = false;
    return lost;
  }
}

async function suitable(list: HostList, host: HostPort, config: pg.ClientConfig): Promise<boolean> {
  const probe = new pg.Client({ ...config, connectionString: list.urlFor(host) });
  probe.on('error', () => undefined);
  try {
    await probe.connect();
    return await isSuitable(probe, list);
  } catch {
    return false;
  } finally {
    await probe.end().catch(() => undefined);
  }
}

/**
 * The first host of `list` that gives a suitable session now, asked afresh each time (for a
 * connection that is not pooled, such as the CDC relay's replication stream); throws NoSuitableHostError.
 */
export async function findSuitableHost(list: HostList, config: pg.ClientConfig = {}): Promise<HostPort> {
  for (const host of list.hosts) if (await suitable(list, host, config)) return host;
  throw new NoSuitableHostError(list.hosts.length, list.targetSessionAttrs);
}

async function isSuitable(client: pg.Client, list: HostList): Promise<boolean> {
  const check = sessionCheck(list.targetSessionAttrs);
  if (check === undefined) return true;
  const { rows } = await client.query<{ ok: boolean }>(check);
  return rows[0]?.ok === true;
}

/**
 * A node-postgres Client class (for pg.Pool's `Client` option) that connects to the hosts of `list`
 * as libpq would: in order, keeping the first whose session is what target_session_attrs asks
 * for, and afterwards that host first. A connection that turns out unsuitable (the primary was
 * demoted, a standby promoted elsewhere) is closed and fails, so the pool's caller retries and the
 * next connection looks again.
 */
function failoverClientClass(list: HostList, config: pg.ClientConfig, chooser: HostChooser): typeof pg.Client {
  class FailoverClient extends pg.Client {
    override connect(): Promise<pg.Client>;
    override connect(callback: (err: Error | null, client?: pg.Client) => void): void;
    override connect(callback?: (err: Error | null, client?: pg.Client) => void): Promise<pg.Client> | void {
      const connected = this.#connectToChosen().then(() => this);
      if (!callback) return connected;
      connected.then(
        (client) => callback(null, client),
        (err: Error) => callback(err),
      );
    }

    async #connectToChosen(): Promise<void> {
      const host = await chooser.pick();
      // pg.Client connects to this.host and this.port (read from the first host's URL at construction).
      Object.assign(this, { host: host.host, port: host.port });
      Object.assign((this as unknown as { connectionParameters: object }).connectionParameters, host);
      try {
        await super.connect();
      } catch (err) {
        chooser.forget(host);
        throw err;
      }
      if (await isSuitable(this, list).catch(() => false)) return;
      chooser.forget(host);
      await this.end().catch(() => undefined);
      throw new NoSuitableHostError(list.hosts.length, list.targetSessionAttrs);
    }
  }
  return FailoverClient;
}

type ConnectCallback = (err: Error | undefined, client?: pg.PoolClient, done?: (release?: unknown) => void) => void;

/**
 * A pg.Pool over the hosts of `list` (failoverClientClass). The first connection after the good host
 * went away fails on that host; as libpq tries the next host within one connect, the pool tries once
 * more at once, which looks at every host, instead of handing the caller an error a failover explains.
 */
export function failoverPool(list: HostList, config: pg.PoolConfig): pg.Pool {
  const chooser = new HostChooser(list, config);
  class FailoverPool extends pg.Pool {
    async #connectOnce(): Promise<pg.PoolClient> {
      try {
        return await super.connect();
      } catch (err) {
        if (!chooser.lostPreferred()) throw err;
        return super.connect();
      }
    }

    override connect(): Promise<pg.PoolClient>;
    override connect(callback: ConnectCallback): void;
    override connect(callback?: ConnectCallback): Promise<pg.PoolClient> | void {
      const connected = this.#connectOnce();
      if (!callback) return connected;
      connected.then(
        (client) => callback(undefined, client, (release) => client.release(release as Error | boolean | undefined)),
        (err: Error) => callback(err),
      );
    }
  }
  return new FailoverPool({ ...config, Client: failoverClientClass(list, config, chooser) });
}
