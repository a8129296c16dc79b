// test-files: heavy, runs the six scenarios twice, one transport each
/** The article's six scenarios, as the same code `npm run lab` prints, on RabbitMQ and on the in-process transport. */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import type amqp from 'amqplib';
import type { LabTransportKind } from '../../lab/broker.js';
import { createLabEnv, type LabRoles } from '../../lab/harness.js';
import { runScenario, scenarios } from '../../lab/scenarios.js';
import {
  after,
  before,
  connectPostgres,
  connectRabbit,
  dropBrokerNames,
  test,
  uniqueName,
  waitFor,
  withChannel,
} from '../support/rig.js';
import { urlAs } from '../support/database-url.js';

/**
 * On RabbitMQ the relays, consumers and the service's writes run as three login roles with only
 * what `converge grants` gives them (as docker-compose.yml's lab does); on the in-process transport
 * everything runs as DATABASE_URL's role, as `npm run lab` does without LAB_*_URL.
 */
const roleNames = {
  relay: uniqueName('lab_relay'),
  consumer: uniqueName('lab_consumer'),
  producer: uniqueName('lab_producer'),
};
const roles: LabRoles = {
  relay: urlAs(roleNames.relay),
  consumer: urlAs(roleNames.consumer),
  producer: urlAs(roleNames.producer),
};

before(async () => {
  const admin = await connectPostgres(1);
  try {
    for (const role of Object.values(roleNames)) await admin.query(`CREATE ROLE "${role}" LOGIN`);
  } finally {
    await admin.end();
  }
});

after(async () => {
  const admin = await connectPostgres(1);
  try {
    for (const role of Object.values(roleNames)) {
      await admin.query(`DROP OWNED BY "${role}"`).catch(() => undefined);
      await admin.query(`DROP ROLE IF EXISTS "${role}"`);
    }
  } finally {
    await admin.end();
  }
});

for (const kind of ['rabbitmq', 'in-process'] satisfies LabTransportKind[])
  for (const scenario of scenarios) {
    const asRoles = kind === 'rabbitmq';
    test(`scenario ${scenario.id} (${kind}${asRoles ? ', least-privilege roles' : ''}): ${scenario.title}`, async () => {
      const result = await runScenario(scenario, kind, asRoles ? roles : null);
      assert.ok(result.checks.length >= 3, 'a scenario checks several facts');
      if (scenario.id === 6) assert.equal(result.summary, 'published=2 deliveries=3 applied=1 inbox=1 amount=10');
    });
  }

/** Whether RabbitMQ has the queue: a passive declare answers 404 NOT_FOUND when it has not. */
async function queueExists(admin: amqp.ChannelModel, queue: string): Promise<boolean> {
  try {
    await withChannel(admin, (channel) => channel.checkQueue(queue));
    return true;
  } catch (err) {
    if ((err as { code?: number }).code === 404) return false;
    throw err;
  }
}

test('a closed lab environment leaves no queue or exchange on RabbitMQ', async () => {
  const admin = await connectRabbit();
  try {
    const env = await createLabEnv('rabbitmq');
    const names = [env.queue, `${env.queue}.retry`];
    for (const queue of names) assert.ok(await queueExists(admin, queue), `${queue} is there while the lab runs`);
    await env.close();
    for (const queue of names) assert.equal(await queueExists(admin, queue), false, `${queue} is gone`);
    const exchange = await withChannel(admin, (channel) => channel.checkExchange(env.exchange)).catch(
      (err: { code?: number }) => err.code,
    );
    assert.equal(exchange, 404, 'the exchange is gone');
  } finally {
    await admin.close();
  }
});

const EXPIRES_MS = 500;

test('a lab process killed with SIGKILL leaves no queue or exchange behind: the broker expires them', async () => {
  const admin = await connectRabbit();
  const pool = await connectPostgres(1);
  const child = spawn(process.execPath, ['--import', 'tsx', 'lab/hold.ts'], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, LAB_QUEUE_EXPIRES_MS: String(EXPIRES_MS) },
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  let names: { schema: string; exchange: string; queue: string } | undefined;
  try {
    names = await waitFor(
      () => (output.includes('\n') ? (JSON.parse(output.split('\n')[0]!) as typeof names) : undefined),
      `the lab process to print its names (output so far: ${output})`,
      30_000,
    );
    const queues = [names.queue, `${names.queue}.retry`];
    for (const queue of queues) assert.ok(await queueExists(admin, queue), `${queue} exists while the lab runs`);
    child.kill('SIGKILL');
    await once(child, 'exit');
    // A passive declare counts as use and restarts the expiry, so look no more often than it.
    const deadline = Date.now() + 15_000;
    let left = queues;
    while (left.length > 0) {
      assert.ok(Date.now() < deadline, `RabbitMQ kept ${left.join(', ')} after the lab process died`);
      await new Promise((resolve) => setTimeout(resolve, 2 * EXPIRES_MS));
      const present = await Promise.all(left.map((queue) => queueExists(admin, queue)));
      left = left.filter((_, i) => present[i]);
    }
    const exchange = await withChannel(admin, (channel) => channel.checkExchange(names!.exchange)).catch(
      (err: { code?: number }) => err.code,
    );
    assert.equal(exchange, 404, 'the exchange went with its last queue (auto-delete)');
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    // What a kill leaves by design: the schema in PostgreSQL.
    if (names) {
      await dropBrokerNames(admin, [names.queue, names.exchange]);
      await pool.query(`DROP SCHEMA IF EXISTS "${names.schema}" CASCADE`);
    }
    await admin.close();
    await pool.end();
  }
});
