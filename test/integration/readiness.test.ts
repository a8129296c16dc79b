/**
 * ready() of relay and consumer against the real services: every misconfiguration this machine can
 * produce rejects with its typed error (and stops the component), a closed port keeps retrying
 * with the reason and delay in every log line, and `timeoutMs` gives up naming the last failure.
 * Wrong PostgreSQL passwords (28P01) cannot happen on this trust-auth server: see
 * test/unit/connection-failure.test.ts.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { startConsumer, startPartitionedConsumers, startRelay, type Consumer, type Relay } from '../../src/index.js';
import { ConnectionConfigError, ReadyTimeoutError, SchemaNotMigratedError } from '../../src/errors.js';
import type { Logger } from '../../src/runtime/logger.js';
import {
  after,
  before,
  describe,
  it,
  createTestSchema,
  uniqueName,
  type TestDatabase,
  AMQP_URL,
  DATABASE_URL,
} from '../support/rig.js';
import { databaseAddress, literal } from '../support/database-url.js';

/** A port nothing listens on: bound by the OS, then released. */
async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

interface Line {
  level: string;
  fields: Record<string, unknown>;
  msg: string;
}

function recordingLogger(): { logger: Logger; lines: Line[] } {
  const lines: Line[] = [];
  const at = (level: string) => (fields: object, msg: string) =>
    void lines.push({ level, fields: fields as Record<string, unknown>, msg });
  return { logger: { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') }, lines };
}

const withUrl = (base: string, change: (url: URL) => void) => {
  const url = new URL(base);
  change(url);
  return url.toString();
};

/** The server under test, as its connection errors name it: "PostgreSQL at host:port: …". */
const POSTGRES_AT = `^PostgreSQL at ${literal(databaseAddress().where)}: `;

let db: TestDatabase;
let closedPort: number;

before(async () => {
  db = await createTestSchema('cvr');
  closedPort = await freePort();
});

after(async () => {
  await db.close();
});

/** Each case: the options to break, the code ready() must reject with, and the words its message must hold. */
const MISCONFIGURED: {
  name: string;
  connectionString?: string;
  amqpUrl?: string;
  schema?: string;
  code: string;
  says: RegExp;
}[] = [
  {
    name: 'wrong AMQP password',
    amqpUrl: withUrl(AMQP_URL, (u) => (u.password = 'cvt-not-the-password')),
    code: 'CONVERGE_BROKER_AUTH_FAILED',
    says: /^RabbitMQ at 127\.0\.0\.1:5672: login refused/,
  },
  {
    name: 'unknown vhost',
    amqpUrl: withUrl(AMQP_URL, (u) => (u.pathname = '/cvt-no-such-vhost')),
    code: 'CONVERGE_BROKER_ACCESS_DENIED',
    says: /vhost "cvt-no-such-vhost" does not exist/,
  },
  {
    name: 'nonexistent database',
    connectionString: withUrl(DATABASE_URL, (u) => (u.pathname = '/cvt_no_such_db')),
    code: 'CONVERGE_DATABASE_NOT_FOUND',
    says: new RegExp(`${POSTGRES_AT}database "cvt_no_such_db" does not exist \\(3D000\\)`),
  },
  {
    name: 'unknown role',
    connectionString: withUrl(DATABASE_URL, (u) => (u.username = 'cvt_no_such_role')),
    code: 'CONVERGE_DATABASE_ACCESS_DENIED',
    says: new RegExp(`${POSTGRES_AT}the role does not exist.*\\(28000\\)`),
  },
  {
    name: 'unmigrated schema',
    schema: 'cvt_never_migrated',
    code: 'CONVERGE_SCHEMA_NOT_MIGRATED',
    says: /schema "cvt_never_migrated" has no converge tables.*run `converge migrate`/,
  },
];

function relayWith(c: { connectionString?: string; amqpUrl?: string; schema?: string }, logger: Logger): Relay {
  return startRelay({
    connectionString: c.connectionString ?? DATABASE_URL,
    amqpUrl: c.amqpUrl ?? AMQP_URL,
    schema: c.schema ?? db.schema,
    // Nothing is published here: no exchange to declare and leave behind.
    exchange: 'amq.topic',
    declareExchange: false,
    logger,
    reconnectBackoff: { initialDelayMs: 50, maxDelayMs: 400 },
  });
}

function consumerWith(c: { connectionString?: string; amqpUrl?: string; schema?: string }, logger: Logger): Consumer {
  return startConsumer({
    queue: uniqueName('cvr.q'),
    connectionString: c.connectionString ?? DATABASE_URL,
    amqpUrl: c.amqpUrl ?? AMQP_URL,
    schema: c.schema ?? db.schema,
    declare: false,
    handlers: { Noop: async () => undefined },
    logger,
    reconnectBackoff: { initialDelayMs: 50, maxDelayMs: 400 },
  });
}

function assertNoSecret(text: string): void {
  assert.doesNotMatch(text, /cvt-not-the-password|guest:|postgres@/, 'no password or user in messages');
}

describe('relay.ready()', () => {
  for (const c of MISCONFIGURED) {
    it(`rejects at once on ${c.name} (${c.code}) and stops`, async () => {
      const { logger, lines } = recordingLogger();
      const relay = relayWith(c, logger);
      const err = await relay.ready().then(
        () => assert.fail('ready() resolved'),
        (e: unknown) => e,
      );
      assert.ok(err instanceof ConnectionConfigError || err instanceof SchemaNotMigratedError);
      assert.equal(err.code, c.code);
      assert.match(err.message, c.says);
      assertNoSecret(err.message);
      assert.equal(relay.failure, err);
      const stop = lines.filter((l) => l.level === 'error');
      assert.equal(stop.length, 1, 'one error line, no retries');
      assert.match(stop[0]!.msg, /cannot work as configured; stopping/);
      assertNoSecret(JSON.stringify(lines));
      await relay.stop();
    });
  }

  it('throws from the constructor on an http:// AMQP URL or a database URL that is no URL', () => {
    assert.throws(
      () => relayWith({ amqpUrl: 'http://guest:guest@127.0.0.1:15672' }, recordingLogger().logger),
      (e: unknown) => e instanceof ConnectionConfigError && e.code === 'CONVERGE_BROKER_URL_INVALID',
    );
    assert.throws(
      () => relayWith({ connectionString: 'notaurl' }, recordingLogger().logger),
      (e: unknown) =>
        e instanceof ConnectionConfigError &&
        e.code === 'CONVERGE_DATABASE_URL_INVALID' &&
        !/ENOTFOUND|\bbase\b/.test(e.message),
    );
  });

  it('keeps retrying a closed port, each log line naming service, code, reason and delay; timeoutMs gives up with the last failure', async () => {
    const { logger, lines } = recordingLogger();
    const relay = relayWith({ amqpUrl: withUrl(AMQP_URL, (u) => (u.port = String(closedPort))) }, logger);
    const err = await relay.ready({ timeoutMs: 1_000 }).then(
      () => assert.fail('ready() resolved'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof ReadyTimeoutError);
    assert.equal(err.lastFailure?.detail, 'ECONNREFUSED');
    assert.match(err.message, new RegExp(`RabbitMQ at 127\\.0\\.0\\.1:${closedPort}: connection refused`));
    const retries = lines.filter((l) => l.msg.startsWith('relay cycle failed; retrying in'));
    assert.ok(retries.length >= 2, `retried: ${retries.length}`);
    for (const line of retries) {
      assert.equal(line.level, 'warn');
      assert.deepEqual(
        [line.fields.service, line.fields.endpoint, line.fields.code],
        ['RabbitMQ', `127.0.0.1:${closedPort}`, 'ECONNREFUSED'],
      );
      assert.equal(typeof line.fields.reason, 'string');
      assert.equal(typeof line.fields.delayMs, 'number');
      assert.match(line.msg, new RegExp(`retrying in ${line.fields.delayMs as number} ms$`));
    }
    assert.equal(relay.failure, undefined, 'a closed port is not a misconfiguration: still running');
    await relay.stop();
  });

  it('resolves once both services answer and the schema is migrated', async () => {
    const relay = relayWith({}, recordingLogger().logger);
    await relay.ready({ timeoutMs: 30_000 });
    assert.equal(relay.connected, true);
    assert.equal(relay.databaseReachable, true);
    await relay.stop();
  });
});

describe('consumer.ready()', () => {
  for (const c of MISCONFIGURED) {
    it(`rejects at once on ${c.name} (${c.code}) and stops`, async () => {
      const { logger, lines } = recordingLogger();
      const consumer = consumerWith(c, logger);
      const err = await consumer.ready().then(
        () => assert.fail('ready() resolved'),
        (e: unknown) => e,
      );
      assert.equal((err as { code?: string }).code, c.code);
      assert.match((err as Error).message, c.says);
      assert.equal(consumer.failure, err);
      assert.equal(lines.filter((l) => l.level === 'error').length, 1);
      assertNoSecret(JSON.stringify(lines));
      await consumer.stop();
    });
  }

  it('with timeoutMs, a closed PostgreSQL port rejects with ReadyTimeoutError naming it; the consumer keeps retrying', async () => {
    const { logger, lines } = recordingLogger();
    const consumer = consumerWith(
      { connectionString: withUrl(DATABASE_URL, (u) => (u.port = String(closedPort))) },
      logger,
    );
    const err = await consumer.ready({ timeoutMs: 800 }).then(
      () => assert.fail('ready() resolved'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof ReadyTimeoutError);
    assert.equal(err.code, 'CONVERGE_READY_TIMEOUT');
    assert.match(
      err.message,
      new RegExp(`PostgreSQL at 127\\.0\\.0\\.1:${closedPort}: connection refused.*\\(ECONNREFUSED\\)`),
    );
    const retries = lines.filter((l) => l.msg.startsWith('consumer session failed; retrying in'));
    assert.ok(retries.length >= 1);
    assert.deepEqual([retries[0]!.fields.service, retries[0]!.fields.code], ['PostgreSQL', 'ECONNREFUSED']);
    assert.equal(consumer.failure, undefined);
    await consumer.stop();
  });

  it('rejects a timeoutMs that is not a positive integer', () => {
    const consumer = consumerWith({}, recordingLogger().logger);
    assert.throws(() => consumer.ready({ timeoutMs: 0 }), /timeoutMs/);
    return consumer.stop();
  });
});

describe('startPartitionedConsumers', () => {
  it('every partition rejects ready() with the typed error on a wrong AMQP password', async () => {
    const consumers = startPartitionedConsumers({
      queuePrefix: uniqueName('cvr.p'),
      partitions: 2,
      connectionString: DATABASE_URL,
      amqpUrl: withUrl(AMQP_URL, (u) => (u.password = 'cvt-not-the-password')),
      schema: db.schema,
      handlers: { Noop: async () => undefined },
      logger: recordingLogger().logger,
    });
    const results = await Promise.allSettled(consumers.map((c) => c.ready()));
    for (const result of results) {
      assert.equal(result.status, 'rejected');
      assert.equal((result.reason as ConnectionConfigError).code, 'CONVERGE_BROKER_AUTH_FAILED');
    }
    await Promise.all(consumers.map((c) => c.stop()));
  });
});
