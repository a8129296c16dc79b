import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import amqp from 'amqplib';
import { Consumer, Relay, type Logger } from '../../src/index.js';
import { connectOptions, DEFAULT_CONNECT_TIMEOUT_MS } from '../../src/transport/connection.js';
import { cliNodeArgs } from '../support/cli-bundle.js';
import { afterEach, describe, mock, test, waitFor, AMQP_URL, DATABASE_URL } from '../support/rig.js';

const PG_SECRET = 'S3cr3t-Pw-42';
const AMQP_SECRET = 'S3cr3t-Pw-43';
const connectionString = `postgres://converge_user:${PG_SECRET}@127.0.0.1:1/test`;
const amqpUrl = `amqp://guest:${AMQP_SECRET}@127.0.0.1:1`;
/** The real broker with a wrong password: the failure is an authentication refusal, not a refused socket. */
const wrongPasswordUrl = `amqp://guest:${AMQP_SECRET}@127.0.0.1:5672`;
const BACKOFF = { initialDelayMs: 10, maxDelayMs: 50 };

function capturingLogger(): Logger & { records: string[] } {
  const records: string[] = [];
  const keep = (obj: object, msg: string) => void records.push(JSON.stringify({ ...obj, msg }));
  return { records, debug: keep, info: keep, warn: keep, error: keep };
}

function assertNoSecret(texts: string[]): void {
  for (const text of texts) {
    assert.ok(!text.includes(PG_SECRET) && !text.includes(AMQP_SECRET), `leaks a password: ${text}`);
  }
}

/** Everything an error carries that a caller might print: message, stack, own properties, causes. */
function errorTexts(err: Error): string[] {
  const texts = [String(err), err.stack ?? '', JSON.stringify(err, Object.getOwnPropertyNames(err))];
  if (err.cause instanceof Error) texts.push(...errorTexts(err.cause));
  return texts;
}

describe('connection strings and passwords stay out of logs and errors', () => {
  for (const [label, brokerUrl] of [
    ['unreachable services', amqpUrl],
    ['a broker refusing the password', wrongPasswordUrl],
  ] as const) {
    test(`relay against ${label}`, async () => {
      const logger = capturingLogger();
      const relay = new Relay({
        connectionString,
        amqpUrl: brokerUrl,
        logger,
        pollIntervalMs: 10,
        reconnectBackoff: BACKOFF,
        backoff: BACKOFF,
        listen: false,
      });
      const errors: Error[] = [];
      relay.on('error', (err) => errors.push(err));
      relay.start();
      try {
        // A refused password stops the relay after one attempt (a misconfiguration); a closed port is retried.
        await waitFor(
          () => (errors.length >= 2 && logger.records.length >= 2) || (relay.failure && logger.records.length >= 1),
          'two failed cycles logged, or the stop on a refused password',
        );
      } finally {
        await relay.stop();
      }
      assertNoSecret(logger.records);
      assertNoSecret(errors.flatMap(errorTexts));
    });

    test(`consumer against ${label}`, async () => {
      const logger = capturingLogger();
      const consumer = new Consumer({
        queue: 'cvt.secrets',
        connectionString,
        amqpUrl: brokerUrl,
        logger,
        reconnectBackoff: BACKOFF,
        handlers: { Anything: async () => undefined },
      });
      const errors: Error[] = [];
      consumer.on('error', (err) => errors.push(err));
      consumer.start();
      try {
        await waitFor(
          () => (errors.length >= 2 && logger.records.length >= 2) || (consumer.failure && logger.records.length >= 1),
          'two failed sessions logged, or the stop on a refused password',
        );
      } finally {
        await consumer.stop();
      }
      assertNoSecret(logger.records);
      assertNoSecret(errors.flatMap(errorTexts));
    });
  }

  test('the CLI exits non-zero without printing the password', async () => {
    const child = spawn(
      process.execPath,
      [...cliNodeArgs(), '--database-url', `postgres://u:${PG_SECRET}@127.0.0.1:1/test`, 'status', '--sample-ms', '0'],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, AMQP_URL: amqpUrl },
      },
    );
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const [code] = (await once(child, 'exit')) as [number | null];
    assert.notEqual(code, 0);
    assert.match(output, /ECONNREFUSED/, 'the failure itself is reported');
    assertNoSecret([output]);
  });
});

describe('AMQP socket options (TLS)', () => {
  afterEach(() => mock.restoreAll());

  test("connectOptions keeps the caller's TLS options and sets our own connection name", () => {
    const options = connectOptions('converge-relay r1', {
      ca: ['CA PEM'],
      servername: 'broker.internal',
      rejectUnauthorized: true,
      clientProperties: { team: 'orders' },
    });
    assert.deepEqual(options, {
      noDelay: true,
      timeout: DEFAULT_CONNECT_TIMEOUT_MS,
      ca: ['CA PEM'],
      servername: 'broker.internal',
      rejectUnauthorized: true,
      clientProperties: { team: 'orders', connection_name: 'converge-relay r1' },
    });
  });

  // No TLS listener runs here: these check that the options reach amqp.connect, not a TLS handshake.
  for (const component of ['relay', 'consumer'] as const) {
    test(`${component} passes amqpSocketOptions to amqp.connect`, async () => {
      const seen: { url: string; options: Record<string, unknown> }[] = [];
      mock.method(amqp, 'connect', async (url: string, options: Record<string, unknown>) => {
        seen.push({ url, options });
        throw Object.assign(new Error('connect ECONNREFUSED (stubbed)'), { code: 'ECONNREFUSED' });
      });
      const tls = {
        ca: [Buffer.from('CA PEM')],
        cert: Buffer.from('CERT'),
        key: Buffer.from('KEY'),
        servername: 'broker.internal',
      };
      const url = 'amqps://guest:guest@broker.internal:5671';
      const common = {
        connectionString: 'postgres://postgres@127.0.0.1:1/test',
        amqpUrl: url,
        amqpSocketOptions: tls,
        reconnectBackoff: BACKOFF,
        logger: capturingLogger(),
      };
      const runner =
        component === 'relay'
          ? new Relay({ ...common, listen: false })
          : new Consumer({ ...common, queue: 'cvt.tls', handlers: { Anything: async () => undefined } });
      runner.on('error', () => undefined);
      runner.start();
      try {
        await waitFor(() => seen.length >= 1, 'a connection attempt');
      } finally {
        await runner.stop();
      }
      const [first] = seen;
      assert.equal(first?.url, url);
      assert.equal(first?.options.ca, tls.ca);
      assert.equal(first?.options.cert, tls.cert);
      assert.equal(first?.options.key, tls.key);
      assert.equal(first?.options.servername, 'broker.internal');
      assert.equal(first?.options.noDelay, true);
      assert.match(
        String((first?.options.clientProperties as { connection_name?: string }).connection_name),
        new RegExp(`^converge-${component}`),
      );
    });
  }

  test('amqpSocketOptions must be an object', () => {
    assert.throws(
      () => new Relay({ amqpUrl: AMQP_URL, connectionString: DATABASE_URL, amqpSocketOptions: 'ca.pem' as never }),
      /"amqpSocketOptions"/,
    );
    assert.throws(
      () =>
        new Consumer({
          amqpUrl: AMQP_URL,
          connectionString: DATABASE_URL,
          queue: 'q',
          handlers: { A: async () => undefined },
          amqpSocketOptions: 5 as never,
        }),
      /"amqpSocketOptions"/,
    );
  });
});
