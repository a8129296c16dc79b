import net from 'node:net';

/**
 * A port of 127.0.0.1 nobody listens on right now (the kernel's pick): for a server we start a moment
 * later (a spare RabbitMQ node, an embedded PostgreSQL), or as an address that refuses connections.
 */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}
