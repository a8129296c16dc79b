/**
 * `npm run scenario:resume`: how fast a relay and a consumer resume after RabbitMQ comes back.
 * Both reach the broker through a TCP proxy (kit/tcp-proxy.ts) that is cut for `--outage`
 * seconds while a producer keeps writing events, then restored; the shared broker itself is
 * never restarted. Prints, per run, the time from the restore to the first publish (relay) and
 * to the first applied event (consumer), and how many reconnect attempts each made while cut.
 * So that the consumer's time does not wait on the relay's, one event is published straight to
 * the broker (around the proxy) during the outage: it waits in the queue for the consumer.
 * Default reconnect backoff. `--runs N` (default 3), `--outage S` (default 10).
 */
import { parseArgs } from 'node:util';
import { performance } from 'node:perf_hooks';
import {
  appendToOutbox,
  migrate,
  silentLogger,
  startConsumer,
  startRelay,
  withTransaction,
  type Consumer,
  type Relay,
} from '../src/index.js';
import { DEFAULT_ROUTING_KEY, encodeMessage, routingKeyFromTemplate } from '../src/internal/index.js';
import {
  AMQP_URL,
  DATABASE_URL,
  connectPostgres,
  connectRabbit,
  dropBrokerNames,
  uniqueName,
} from '../kit/services.js';
import { TcpProxy } from '../kit/tcp-proxy.js';

const { values: flags } = parseArgs({
  options: { runs: { type: 'string', default: '3' }, outage: { type: 'string', default: '10' } },
});
const RUNS = Number(flags.runs);
const OUTAGE_MS = Number(flags.outage) * 1000;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

async function until(condition: () => boolean, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!condition()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/** One event for its own aggregate, published on the admin connection that does not go through the proxy. */
async function publishAround(admin: Awaited<ReturnType<typeof connectRabbit>>, exchange: string): Promise<void> {
  const message = encodeMessage(
    {
      eventId: crypto.randomUUID(),
      aggregateType: 'clock',
      aggregateId: 'direct',
      aggregateVersion: 1,
      eventType: 'Tick',
      schemaVersion: 1,
      kind: 'incremental',
      payload: {},
      occurredAt: new Date().toISOString(),
    },
    routingKeyFromTemplate(DEFAULT_ROUTING_KEY),
  );
  const channel = await admin.createConfirmChannel();
  channel.publish(exchange, message.routingKey, message.content, { ...message.options, mandatory: true });
  await channel.waitForConfirms();
  await channel.close();
}

interface RunResult {
  publishMs: number;
  applyMs: number;
  relayAttempts: number;
  consumerAttempts: number;
}

async function run(): Promise<RunResult> {
  const proxy = await TcpProxy.inFrontOf(AMQP_URL, 5672);
  const pool = await connectPostgres(8);
  const admin = await connectRabbit();
  const schema = uniqueName('cvr_resume');
  const exchange = uniqueName('cvr_resume_x');
  const queue = uniqueName('cvr_resume_q');
  let relay: Relay | undefined;
  let consumer: Consumer | undefined;
  try {
    await migrate(pool, { schema });
    const amqpUrl = proxy.url(AMQP_URL);
    relay = startRelay({ schema, exchange, amqpUrl, connectionString: DATABASE_URL, logger: silentLogger });
    consumer = startConsumer({
      queue,
      exchange,
      amqpUrl,
      pool,
      schema,
      logger: silentLogger,
      handlers: { Tick: async () => undefined },
    });
    let published = 0;
    let relayErrors = 0;
    let consumerErrors = 0;
    relay.on('published', (ids) => (published += ids.length));
    relay.on('error', () => relayErrors++);
    consumer.on('error', () => consumerErrors++);
    await Promise.all([relay.ready(), consumer.ready()]);

    let version = 0;
    const write = () =>
      withTransaction(pool, (client) =>
        appendToOutbox(
          client,
          { aggregateType: 'clock', aggregateId: 'c1', aggregateVersion: ++version, eventType: 'Tick', payload: {} },
          { schema },
        ),
      );
    await write();
    await until(() => consumer!.stats.applied === 1, 'the first event before the outage');

    proxy.cut();
    const cutAt = performance.now();
    await publishAround(admin, exchange);
    while (performance.now() - cutAt < OUTAGE_MS) {
      await write();
      await sleep(100);
    }
    const [relayAttempts, consumerAttempts] = [relayErrors, consumerErrors];
    const [publishedBefore, appliedBefore] = [published, consumer.stats.applied];
    proxy.restore();
    const restoredAt = performance.now();
    let publishMs = NaN;
    let applyMs = NaN;
    await until(() => {
      const now = performance.now() - restoredAt;
      if (Number.isNaN(publishMs) && published > publishedBefore) publishMs = now;
      if (Number.isNaN(applyMs) && consumer!.stats.applied > appliedBefore) applyMs = now;
      return !Number.isNaN(publishMs) && !Number.isNaN(applyMs);
    }, 'the first publish and the first apply after the restore');
    await until(() => consumer!.stats.applied === version + 1, 'the backlog to drain');
    return { publishMs, applyMs, relayAttempts, consumerAttempts };
  } finally {
    await relay?.stop();
    await consumer?.stop();
    await proxy.close();
    await dropBrokerNames(admin, [queue, `${queue}.retry`, exchange]);
    await admin.close();
    await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await pool.end();
  }
}

const results: RunResult[] = [];
for (let i = 1; i <= RUNS; i++) {
  const result = await run();
  results.push(result);
  console.log(
    `run ${i}: outage=${OUTAGE_MS / 1000}s relay_first_publish_ms=${result.publishMs.toFixed(0)} consumer_first_apply_ms=${result.applyMs.toFixed(0)} relay_failed_cycles=${result.relayAttempts} consumer_failed_sessions=${result.consumerAttempts}`,
  );
}
const worst = (pick: (r: RunResult) => number) => Math.max(...results.map(pick)).toFixed(0);
console.log(
  `worst: relay_first_publish_ms=${worst((r) => r.publishMs)} consumer_first_apply_ms=${worst((r) => r.applyMs)}`,
);
