/**
 * The naive consumer: no inbox, no version check, no quarantine. Collect up to `batch`
 * deliveries (or whatever arrived within `lingerMs` of the first), upsert the projection in
 * one transaction, then ack the whole batch with one ack-multiple.
 */
import amqp, { type ConsumeMessage } from 'amqplib';
import pg from 'pg';
import { runWorker, type BaseConfig } from './ipc.js';

export interface NaiveConsumerConfig extends BaseConfig {
  schema: string;
  /** Read-model table in `schema` (id, amount, version); `naive_projection` unless given. */
  table?: string;
  /**
   * `naive`: the naive relay's body ({ aggregateId, version, payload, occurredAt }); `envelope`:
   * converge's wire body (aggregateVersion), for the consumer baseline fed the very queue converge's consumer gets.
   */
  shape?: 'naive' | 'envelope';
  queue: string;
  prefetch: number;
  batch: number;
  lingerMs: number;
  latency: boolean;
}

interface Body {
  aggregateId: string;
  version?: number;
  aggregateVersion?: number;
  payload: { delta: number };
  occurredAt: string;
}

void runWorker<NaiveConsumerConfig>(async (config, progress) => {
  const table = `"${config.schema}"."${config.table ?? 'naive_projection'}"`;
  const versionOf = (body: Body) => (config.shape === 'envelope' ? body.aggregateVersion : body.version) ?? 0;
  // One statement per batch; rows of one aggregate are folded first because ON CONFLICT may touch a row only once per statement.
  const upsert = `INSERT INTO ${table} AS p (id, amount, version) SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[])
                  ON CONFLICT (id) DO UPDATE SET amount = p.amount + EXCLUDED.amount, version = GREATEST(p.version, EXCLUDED.version)`;
  const latencies: number[] = [];
  const client = new pg.Client({ connectionString: config.databaseUrl, application_name: 'naive-consumer' });
  let connection: amqp.ChannelModel | undefined;
  let channel: amqp.Channel | undefined;
  const buffer: ConsumeMessage[] = [];
  let timer: NodeJS.Timeout | undefined;
  let chain: Promise<void> = Promise.resolve();

  async function flush(batch: ConsumeMessage[]): Promise<void> {
    const folded = new Map<string, { delta: number; version: number }>();
    const bodies = batch.map((message) => JSON.parse(message.content.toString()) as Body);
    for (const body of bodies) {
      const seen = folded.get(body.aggregateId);
      folded.set(body.aggregateId, {
        delta: (seen?.delta ?? 0) + body.payload.delta,
        version: Math.max(seen?.version ?? 0, versionOf(body)),
      });
    }
    await client.query('BEGIN');
    await client.query(upsert, [
      [...folded.keys()],
      [...folded.values()].map((v) => v.delta),
      [...folded.values()].map((v) => v.version),
    ]);
    await client.query('COMMIT');
    const committed = Date.now();
    channel!.ack(batch[batch.length - 1]!, true);
    progress.add(batch.length);
    if (config.latency) for (const body of bodies) latencies.push(committed - Date.parse(body.occurredAt));
  }

  /** Batches run one after another on the single connection, in delivery order, so ack-multiple is exact. */
  function cut(): void {
    clearTimeout(timer);
    timer = undefined;
    while (buffer.length > 0) {
      const batch = buffer.splice(0, config.batch);
      chain = chain.then(() => flush(batch));
    }
  }

  return {
    async start() {
      await client.connect();
      connection = await amqp.connect(config.amqpUrl, { noDelay: true });
      channel = await connection.createChannel();
      await channel.prefetch(config.prefetch);
      await channel.consume(config.queue, (message) => {
        if (!message) return;
        buffer.push(message);
        if (buffer.length >= config.batch) cut();
        else timer ??= setTimeout(cut, config.lingerMs);
      });
    },
    async stop() {
      cut();
      await chain;
      await channel?.close().catch(() => undefined);
      await connection?.close().catch(() => undefined);
      await client.end().catch(() => undefined);
      return { applied: progress.count, latencies };
    },
  };
});
