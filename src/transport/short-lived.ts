import type { Transport, TransportConnection } from './transport.js';

/**
 * A connection for one short task (a status read, a replay, a plugin probe): opened under `name`,
 * handed to `work`, and closed whatever happens. Nothing else holds it, so no one needs to hear
 * that it ended or to abort it.
 */
export async function withConnection<T>(
  transport: Transport,
  name: string,
  work: (connection: TransportConnection) => Promise<T>,
): Promise<T> {
  const connection = await transport.connect({ name, signal: new AbortController().signal, onClose: () => undefined });
  try {
    return await work(connection);
  } finally {
    await connection.close().catch(() => undefined);
  }
}
