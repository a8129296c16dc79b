import { randomBytes } from 'node:crypto';
import amqp from 'amqplib';
import pg from 'pg';

export const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
export const AMQP_URL = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';

export function unique(prefix: string): string {
  return `${prefix}_${Date.now().toString(36)}_${randomBytes(3).toString('hex')}`;
}

export async function openPool(max = 8): Promise<pg.Pool> {
  const pool = new pg.Pool({ connectionString: DATABASE_URL, max });
  pool.on('error', () => undefined);
  try {
    await pool.query('SELECT 1');
  } catch (err) {
    throw new Error(`PostgreSQL is not reachable (${(err as Error).message}); start it with: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start`);
  }
  return pool;
}

export async function openBroker(): Promise<amqp.ChannelModel> {
  try {
    return await amqp.connect(AMQP_URL);
  } catch (err) {
    throw new Error(`RabbitMQ is not reachable (${(err as Error).message}); start it with: rabbitmq-server -detached`);
  }
}

/** A ~200-byte body like a typical small event. */
export function body(i: number): Buffer {
  return Buffer.from(JSON.stringify({ i, note: 'x'.repeat(170) }));
}
