/**
 * The naive relay: no leases, no per-aggregate ordering rule, no retry bookkeeping, no
 * return handling. Claim the oldest unpublished rows, publish them all, wait for the
 * confirms, flag them. It is what a first version typically looks like, i.e. the bar
 * converge's extra guarantees have to be paid for against.
 */
import amqp from 'amqplib';
import pg from 'pg';
import { runWorker, type BaseConfig } from './ipc.js';

export interface NaiveRelayConfig extends BaseConfig {
  schema: string;
  exchange: string;
  batch: number;
  /** Sleep after an empty claim. */
  idleMs: number;
}

interface Row {
  id: string;
  aggregate_id: string;
  version: string;
  payload: unknown;
  occurred_at: Date;
}

void runWorker<NaiveRelayConfig>(async (config, progress) => {
  const table = `"${config.schema}".naive_outbox`;
  let stopping = false;
  let loop: Promise<void> | undefined;

  async function run(): Promise<void> {
    // Connections are opened on start, as converge's relay does, so both pay for them inside the measurement.
    const client = new pg.Client({ connectionString: config.databaseUrl, application_name: 'naive-relay' });
    await client.connect();
    const connection = await amqp.connect(config.amqpUrl, { noDelay: true });
    const channel = await connection.createConfirmChannel();
    try {
      while (!stopping) {
        const { rows } = await client.query<Row>(
          `SELECT id, aggregate_id, version, payload, occurred_at FROM ${table} WHERE NOT published ORDER BY id LIMIT $1`,
          [config.batch],
        );
        if (rows.length === 0) {
          await new Promise((resolve) => setTimeout(resolve, config.idleMs));
          continue;
        }
        for (const row of rows) {
          const body = {
            id: row.id,
            aggregateId: row.aggregate_id,
            version: Number(row.version),
            payload: row.payload,
            occurredAt: row.occurred_at.toISOString(),
          };
          channel.publish(config.exchange, 'naive.event', Buffer.from(JSON.stringify(body)), {
            persistent: true,
            mandatory: true,
            contentType: 'application/json',
          });
        }
        await channel.waitForConfirms();
        await client.query(`UPDATE ${table} SET published = true WHERE id = ANY($1::bigint[])`, [
          rows.map((row) => row.id),
        ]);
        progress.add(rows.length);
      }
    } finally {
      await channel.close().catch(() => undefined);
      await connection.close().catch(() => undefined);
      await client.end().catch(() => undefined);
    }
  }

  return {
    start() {
      loop = run();
      loop.catch(() => undefined);
    },
    async stop() {
      stopping = true;
      await loop;
      return { published: progress.count };
    },
  };
});
