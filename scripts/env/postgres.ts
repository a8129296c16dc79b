/** Small PostgreSQL look-ups the launchers print. */
import pg from 'pg';

/** `18.4`, say: what the launcher tells the user it runs on. */
export async function serverVersion(url: string): Promise<string> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  client.on('error', () => undefined);
  await client.connect();
  try {
    const { rows } = await client.query<{ server_version: string }>('SHOW server_version');
    return rows[0]!.server_version.split(' ')[0]!;
  } finally {
    await client.end().catch(() => undefined);
  }
}
