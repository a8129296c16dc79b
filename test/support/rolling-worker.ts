/**
 * One relay or consumer of test/integration/rolling-upgrade.test.ts, run as a child process from
 * either converge release: `code` is the previous release's unpacked dist/index.js, or 'src' for
 * the current sources. Settings come as JSON in ROLLING_WORKER. It prints `ready`, then, for a
 * relay, `published <id>,<id>,...` per batch it marked; SIGTERM stops it gracefully (exit 0).
 * The consumer's handler writes the projection and one log row (which consumer applied which
 * version, in commit order) in the delivery's transaction, so the test sees what applied where.
 * Warnings go to stderr through pino (codes and ids, never payloads).
 */
import { pathToFileURL } from 'node:url';
import pino from 'pino';

interface Settings {
  role: 'relay' | 'consumer';
  code: string;
  tag: string;
  connectionString: string;
  amqpUrl: string;
  schema: string;
  exchange: string;
  queue: string;
}

type Converge = typeof import('../../src/index.js');

const settings = JSON.parse(process.env.ROLLING_WORKER ?? '{}') as Settings;
const converge = (await import(
  settings.code === 'src' ? '../../src/index.js' : pathToFileURL(settings.code).href
)) as Converge;
const logger = pino({ level: 'warn', base: { worker: settings.tag } }, pino.destination(2));
const { connectionString, amqpUrl, schema, exchange } = settings;

function startRelay(): { ready(): Promise<void>; stop(): Promise<void> } {
  const relay = converge.startRelay({ connectionString, amqpUrl, schema, exchange, pollIntervalMs: 20, logger });
  relay.on('published', (ids) => process.stdout.write(`published ${ids.join(',')}\n`));
  return relay;
}

function startConsumer(): { ready(): Promise<void>; stop(): Promise<void> } {
  const q = `"${schema}"`;
  return converge.startConsumer({
    connectionString,
    amqpUrl,
    schema,
    exchange,
    queue: settings.queue,
    logger,
    handlers: {
      Added: async (event, { tx }) => {
        await converge.applyIncrement(tx, { projection: 'rolling_totals', event, schema }, async () => {
          await tx.query(
            `INSERT INTO ${q}.rolling_log (event_id, aggregate_id, version, consumer) VALUES ($1, $2, $3, $4)`,
            [event.eventId, event.aggregateId, event.aggregateVersion, settings.tag],
          );
          return tx.query(
            `INSERT INTO ${q}.rolling_totals (id, total, version) VALUES ($1, $2, $3)
             ON CONFLICT (id) DO UPDATE SET total = rolling_totals.total + EXCLUDED.total, version = EXCLUDED.version`,
            [event.aggregateId, (event.payload as { delta: number }).delta, event.aggregateVersion],
          );
        });
      },
    },
  });
}

const worker = settings.role === 'relay' ? startRelay() : startConsumer();
process.once('SIGTERM', () => {
  worker.stop().then(
    () => process.exit(0),
    (err: unknown) => {
      process.stderr.write(`${settings.tag}: stop failed: ${(err as Error).name}\n`);
      process.exit(1);
    },
  );
});
await worker.ready();
process.stdout.write('ready\n');
