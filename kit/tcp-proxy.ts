import net from 'node:net';

/** One client connection and its upstream twin. */
interface Pair {
  client: net.Socket;
  upstream: net.Socket;
}

/**
 * A TCP proxy in front of a shared service (the test broker), so one test can take "the broker"
 * away from its own clients without restarting the server others use. Its faults:
 *
 * - `cut()` drops every proxied connection and refuses new ones until `restore()`: to amqplib
 *   that looks as a broker that went down (connection lost, then ECONNRESET-like failures).
 * - `blackhole()` drops every proxied connection and then accepts new ones without ever
 *   answering, until `restore()`: a connect that hangs, as behind a firewall that drops packets.
 * - `holdReplies()` stops passing what the service sends (on open connections and new ones)
 *   while the client's bytes still reach it, until `releaseReplies()` passes on everything held:
 *   a connection that stalls mid-session, e.g. publisher confirms that do not come back in time.
 *
 * The real service keeps serving everyone else throughout.
 */
export class TcpProxy {
  readonly #server: net.Server;
  readonly #pairs = new Set<Pair>();
  /** Black-holed clients: accepted, never answered, destroyed by restore() or close(). */
  readonly #swallowed = new Set<net.Socket>();
  readonly #target: { host: string; port: number };
  #mode: 'open' | 'cut' | 'blackhole' = 'open';
  #holding = false;

  private constructor(target: { host: string; port: number }) {
    this.#target = target;
    this.#server = net.createServer((client) => this.#accept(client));
  }

  /** Listens on an ephemeral port of 127.0.0.1 and forwards to `target`. */
  static async start(target: { host: string; port: number }): Promise<TcpProxy> {
    const proxy = new TcpProxy(target);
    await new Promise<void>((resolve, reject) => {
      proxy.#server.once('error', reject);
      proxy.#server.listen(0, '127.0.0.1', () => resolve());
    });
    return proxy;
  }

  /** A proxy in front of the service a URL names (`amqp://…`, `postgres://…`); `defaultPort` when it names none. */
  static inFrontOf(url: string, defaultPort: number): Promise<TcpProxy> {
    const parsed = new URL(url);
    return TcpProxy.start({ host: parsed.hostname, port: Number(parsed.port || defaultPort) });
  }

  get port(): number {
    return (this.#server.address() as net.AddressInfo).port;
  }

  /** Client connections currently proxied or swallowed (a closed client leaves the count). */
  get connections(): number {
    return this.#pairs.size + this.#swallowed.size;
  }

  /** `url` with its host and port replaced by this proxy's. */
  url(url: string): string {
    const parsed = new URL(url);
    parsed.hostname = '127.0.0.1';
    parsed.port = String(this.port);
    return parsed.toString();
  }

  /** Drops all proxied connections; new ones are closed as soon as they arrive, until restore(). */
  cut(): void {
    this.#mode = 'cut';
    this.#dropAll();
  }

  /** Drops all proxied connections; new ones are accepted and never answered, until restore(). */
  blackhole(): void {
    this.#mode = 'blackhole';
    this.#dropAll();
  }

  /** Ends cut() or blackhole(): new connections reach the service again. Swallowed ones are dropped. */
  restore(): void {
    this.#mode = 'open';
    for (const socket of this.#swallowed) socket.destroy();
    this.#swallowed.clear();
  }

  /** Holds back everything the service sends, on open and new connections, until releaseReplies(). */
  holdReplies(): void {
    this.#holding = true;
    for (const { client, upstream } of this.#pairs) {
      upstream.unpipe(client);
      upstream.pause();
    }
  }

  /** Passes on what was held back, and everything after it. */
  releaseReplies(): void {
    this.#holding = false;
    for (const { client, upstream } of this.#pairs) upstream.pipe(client);
  }

  async close(): Promise<void> {
    this.cut();
    this.restore();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  #dropAll(): void {
    for (const { client, upstream } of this.#pairs) {
      client.destroy();
      upstream.destroy();
    }
    this.#pairs.clear();
    for (const socket of this.#swallowed) socket.destroy();
    this.#swallowed.clear();
  }

  #accept(client: net.Socket): void {
    if (this.#mode === 'cut') {
      client.destroy();
      return;
    }
    if (this.#mode === 'blackhole') {
      this.#swallowed.add(client);
      client.on('error', () => undefined);
      client.on('close', () => this.#swallowed.delete(client));
      // Read and drop what the client sends, so its hang-up is seen and the socket closes.
      client.resume();
      return;
    }
    const upstream = net.connect(this.#target.port, this.#target.host);
    const pair: Pair = { client, upstream };
    this.#pairs.add(pair);
    for (const [socket, other] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      socket.on('error', () => other.destroy());
      socket.on('close', () => {
        this.#pairs.delete(pair);
        other.destroy();
      });
    }
    client.pipe(upstream);
    if (!this.#holding) upstream.pipe(client);
  }
}
