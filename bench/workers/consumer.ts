/**
 * converge's Consumer in its own process, with the batch API a throughput-minded user would
 * pick: every delivery is recorded in the inbox, applyIncrements checks and advances the
 * projection versions of the whole batch, and one set-based upsert adds the deltas to the
 * read model, all in the consumer's one transaction per batch.
 */
import { applyIncrements, Consumer, silentLogger, type ConsumerOptions } from '../../src/index.js';
import { ConfigError } from '../../src/errors.js';
import { quoteIdentifier } from '../../src/runtime/identifier.js';
import { reportError, runWorker, type BaseConfig } from './ipc.js';

export interface ConsumerWorkerConfig extends BaseConfig {
  schema: string;
  queue: string;
  exchange: string;
  /** Inbox scope; a history run reuses the scope its seeded inbox rows belong to. */
  consumer: string;
  projection: string;
  /** Read-model table in `schema`: (id text primary key, amount bigint, version bigint). */
  readTable: string;
  prefetch: number;
  /** Options that may or may not exist in this version of ConsumerOptions (batching), plus --consumer-options. */
  optional: Record<string, unknown>;
  /** Record commit time − occurredAt for every applied event. */
  latency: boolean;
}

type ConsumerOptionsMaybe = ConsumerOptions & Record<string, unknown>;

/** Same approach as the relay worker: unknown optional keys are dropped and reported, never guessed into src. */
function createConsumer(
  options: ConsumerOptionsMaybe,
  optional: Record<string, unknown>,
): { consumer: Consumer; dropped: string[] } {
  const dropped: string[] = [];
  for (;;) {
    try {
      return { consumer: new Consumer(options), dropped };
    } catch (err) {
      const field = err instanceof ConfigError ? err.field.split('.')[0]! : undefined;
      if (!field || !(field in optional) || !(field in options)) throw err;
      delete options[field];
      dropped.push(field);
    }
  }
}

void runWorker<ConsumerWorkerConfig>(async (config, progress) => {
  const upsert = `INSERT INTO ${quoteIdentifier(config.schema)}.${quoteIdentifier(config.readTable)} AS r (id, amount, version)
                  SELECT id, sum(delta), max(version) FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS e(id, delta, version) GROUP BY id
                  ON CONFLICT (id) DO UPDATE SET amount = r.amount + EXCLUDED.amount, version = EXCLUDED.version`;
  // eventId → [occurredAt, handler start] (ms); read back on 'settled', which the consumer emits right after commit and ack.
  const seen = new Map<string, [number, number]>();
  const latencies: number[] = [];
  /** [eventId, occurredAt, handler start, commit] per applied event, for the stage breakdown. */
  const stages: [string, number, number, number][] = [];
  const options: ConsumerOptionsMaybe = {
    connectionString: config.databaseUrl,
    amqpUrl: config.amqpUrl,
    schema: config.schema,
    queue: config.queue,
    consumer: config.consumer,
    exchange: config.exchange,
    bindings: ['#'],
    prefetch: config.prefetch,
    logger: silentLogger,
    batchHandler: async (events, { tx, schema }) => {
      if (config.latency) {
        const now = Date.now();
        for (const event of events) seen.set(event.eventId, [Date.parse(event.occurredAt), now]);
      }
      await applyIncrements(tx, { projection: config.projection, events, schema }, async (applied) => {
        return tx.query(upsert, [
          applied.map((e) => e.aggregateId),
          applied.map((e) => (e.payload as { delta: number }).delta),
          applied.map((e) => e.aggregateVersion),
        ]);
      });
    },
    ...config.optional,
  };
  const { consumer, dropped } = createConsumer(options, config.optional);
  const resolved = consumer.options as unknown as Record<string, unknown>;
  const effective: Record<string, unknown> = { prefetch: consumer.options.prefetch };
  for (const key of Object.keys(config.optional))
    effective[key] = key in resolved && !dropped.includes(key) ? resolved[key] : 'unsupported';
  // Batching knobs that exist but were not set are listed too, so a reader sees they ran at their defaults.
  for (const [key, value] of Object.entries(resolved)) {
    if (
      /batch|concurren|parallel/i.test(key) &&
      !(key in effective) &&
      ['number', 'boolean', 'string'].includes(typeof value)
    )
      effective[key] = `${String(value)} (default)`;
  }

  consumer.on('settled', (settlement) => {
    if (settlement.action !== 'ack' || settlement.outcome !== 'applied') return;
    progress.add(1);
    if (!config.latency || settlement.eventId === null) return;
    const times = seen.get(settlement.eventId);
    if (times === undefined) return;
    seen.delete(settlement.eventId);
    const committed = Date.now();
    latencies.push(committed - times[0]);
    stages.push([settlement.eventId, times[0], times[1], committed]);
  });
  consumer.on('error', reportError);
  return {
    info: { options: effective },
    async start() {
      consumer.start();
      await consumer.ready();
    },
    async stop() {
      await consumer.stop();
      return { stats: { ...consumer.stats }, latencies, stages };
    },
  };
});
