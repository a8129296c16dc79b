import net from 'node:net';

/**
 * A TCP proxy in front of a shared service (the test broker), so one test can take "the broker"
 * away from its own clients without restarting the server others use. `cut()` drops every
 * proxied connection and refuses new ones until `restore()`: to amqplib that looks as a broker
 * that went down (connection lost, then ECONNREFUSED-like failures), whereas the real broker
 * keeps serving everyone else.
 */
export class TcpProxy {
  readonly #server: net.Server;
  readonly #sockets = new Set<net.Socket>();
  readonly #target: { host: string; port: number };
  #cut = false;

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

  get port(): number {
    return (this.#server.address() as net.AddressInfo).port;
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
    this.#cut = true;
    for (const socket of this.#sockets) socket.destroy();
    this.#sockets.clear();
  }

  restore(): void {
    this.#cut = false;
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  #accept(client: net.Socket): void {
    if (this.#cut) {
      client.destroy();
      return;
    }
    const upstream = net.connect(this.#target.port, this.#target.host);
    for (const [socket, other] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      this.#sockets.add(socket);
      socket.on('error', () => other.destroy());
      socket.on('close', () => {
        this.#sockets.delete(socket);
        other.destroy();
      });
    }
    client.pipe(upstream);
    upstream.pipe(client);
  }
}
