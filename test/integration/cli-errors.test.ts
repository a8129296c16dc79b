/**
 * The CLI against misconfiguration and bad input, from the shell: every case this machine can
 * produce exits non-zero on its own with one line naming the service, host:port and the cause,
 * never a password; a closed port keeps the relay retrying with the reason and the delay in each
 * line; bad flags and ids are refused before anything connects. The measured exit times are in
 * docs/troubleshooting.md (tests assert no wall-clock bound).
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { cli, runCli } from '../support/cli.js';
import {
  after,
  before,
  test,
  createTestSchema,
  waitFor,
  type TestDatabase,
  AMQP_URL,
  DATABASE_URL,
} from '../support/rig.js';
import { databaseAddress, literal } from '../support/database-url.js';

let db: TestDatabase;
let closedPort: number;

before(async () => {
  db = await createTestSchema('cvce');
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closedPort = (server.address() as net.AddressInfo).port;
  await new Promise((resolve) => server.close(resolve));
});

after(async () => {
  await db.close();
});

const SECRET = 'cvt-not-the-password';
/** The server under test, as its connection errors name it: "PostgreSQL at host:port: …". */
const POSTGRES_AT = `PostgreSQL at ${literal(databaseAddress().where)}: `;
const url = (base: string, change: (u: URL) => void) => {
  const u = new URL(base);
  change(u);
  return u.toString();
};

const RELAY_CASES: { name: string; args: string[]; code: string; says: RegExp }[] = [
  {
    name: 'wrong AMQP password',
    args: ['relay', '--amqp-url', url(AMQP_URL, (u) => (u.password = SECRET))],
    code: 'CONVERGE_BROKER_AUTH_FAILED',
    says: /RabbitMQ at 127\.0\.0\.1:5672: login refused: wrong user name or password \(ACCESS_REFUSED\)/,
  },
  {
    name: 'unknown vhost',
    args: ['relay', '--amqp-url', url(AMQP_URL, (u) => (u.pathname = '/cvt-no-such-vhost'))],
    code: 'CONVERGE_BROKER_ACCESS_DENIED',
    says: /vhost "cvt-no-such-vhost" does not exist or the user has no permissions on it \(NOT_ALLOWED\)/,
  },
  {
    name: 'http:// AMQP URL',
    args: ['relay', '--amqp-url', `http://guest:${SECRET}@127.0.0.1:15672`],
    code: 'CONVERGE_BROKER_URL_INVALID',
    says: /the AMQP URL has scheme "http:", expected amqp: or amqps:/,
  },
  {
    name: 'nonexistent database',
    args: ['--database-url', url(DATABASE_URL, (u) => (u.pathname = '/cvt_no_such_db')), 'relay'],
    code: 'CONVERGE_DATABASE_NOT_FOUND',
    says: new RegExp(`${POSTGRES_AT}database "cvt_no_such_db" does not exist \\(3D000\\)`),
  },
  {
    name: 'unknown role',
    args: [
      '--database-url',
      url(DATABASE_URL, (u) => ((u.username = 'cvt_no_such_role'), (u.password = SECRET))),
      'relay',
    ],
    code: 'CONVERGE_DATABASE_ACCESS_DENIED',
    says: new RegExp(`${POSTGRES_AT}the role does not exist.*\\(28000\\)`),
  },
  {
    name: 'unmigrated schema',
    args: ['--schema', 'cvt_never_migrated', 'relay'],
    code: 'CONVERGE_SCHEMA_NOT_MIGRATED',
    says: /schema "cvt_never_migrated" has no converge tables, this converge needs migration \d+; run `converge migrate`/,
  },
  {
    name: 'DATABASE_URL=notaurl',
    args: ['--database-url', 'notaurl', 'relay'],
    code: 'CONVERGE_DATABASE_URL_INVALID',
    says: /PostgreSQL at \(unparseable url\): the connection string is not a URL/,
  },
];

for (const c of RELAY_CASES) {
  test(`converge relay with ${c.name} exits 1 with ${c.code} and the cause`, async () => {
    const result = await cli(['--schema', db.schema, ...c.args]);
    assert.equal(result.code, 1, result.stderr);
    const line = result.stderr.trim().split('\n').at(-1)!;
    assert.ok(line.startsWith(`converge: ${c.code}: `), line);
    assert.match(line, c.says);
    assert.doesNotMatch(result.stdout + result.stderr, new RegExp(`${SECRET}|ENOTFOUND|relay cycle failed`));
  });
}

test('converge relay with a closed AMQP port keeps retrying, each line naming service, code, reason and delay, until SIGTERM', async () => {
  const child = runCli(['--schema', db.schema, 'relay', '--amqp-url', `amqp://guest:guest@127.0.0.1:${closedPort}`]);
  let stdout = '';
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  const exited = once(child, 'exit');
  const retries = () =>
    stdout
      .split('\n')
      .filter((l) => l.includes('relay cycle failed'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  await waitFor(() => retries().length >= 2, 'two retry lines');
  child.kill('SIGTERM');
  const [code] = (await exited) as [number | null];
  assert.equal(code, 0, 'stopped by the signal, not by a failure');
  for (const line of retries()) {
    assert.equal(line.service, 'RabbitMQ');
    assert.equal(line.endpoint, `127.0.0.1:${closedPort}`);
    assert.equal(line.code, 'ECONNREFUSED');
    assert.match(String(line.reason), /connection refused/);
    assert.equal(typeof line.delayMs, 'number');
    assert.equal(line.msg, `relay cycle failed; retrying in ${line.delayMs as number} ms`);
  }
});

test('operator commands name the database failure and the unmigrated schema instead of a raw error', async () => {
  const missing = await cli([
    '--database-url',
    url(DATABASE_URL, (u) => (u.pathname = '/cvt_no_such_db')),
    'dlq',
    'list',
  ]);
  assert.equal(missing.code, 1);
  assert.match(
    missing.stderr,
    new RegExp(`^converge: CONVERGE_DATABASE_NOT_FOUND: ${POSTGRES_AT}database "cvt_no_such_db"`, 'm'),
  );
  const closed = await cli(['--database-url', `postgres://postgres:${SECRET}@127.0.0.1:${closedPort}/test`, 'status']);
  assert.equal(closed.code, 1);
  assert.match(
    closed.stderr,
    new RegExp(
      `^converge: CONVERGE_DATABASE_UNAVAILABLE: PostgreSQL at 127\\.0\\.0\\.1:${closedPort}: connection refused.*\\(ECONNREFUSED\\)$`,
      'm',
    ),
  );
  assert.doesNotMatch(closed.stderr, new RegExp(SECRET));
  const unmigrated = await cli(['--schema', 'cvt_never_migrated', 'outbox', 'list']);
  assert.equal(unmigrated.code, 1);
  assert.match(unmigrated.stderr, /CONVERGE_SCHEMA_NOT_MIGRATED: .*run `converge migrate`/);
  assert.doesNotMatch(unmigrated.stderr, /42P01/);
});

test('bad numbers, durations and ids are refused before any query, with the flag named', async () => {
  // A database URL nothing listens on: reaching it would print ECONNREFUSED instead.
  const nowhere = ['--database-url', `postgres://postgres@127.0.0.1:${closedPort}/test`];
  const cases: [string[], RegExp][] = [
    [['outbox', 'list', '--limit', '-1'], /option '--limit <n>' argument '-1' is invalid\. must be a positive integer/],
    [['gaps', '--limit', '0'], /must be a positive integer/],
    [['dlq', 'show', 'abc'], /argument 'id'.*must be a quarantine id/],
    [['dlq', 'discard', '7', 'x7', '--reason', 'r'], /must be a quarantine id/],
    [['dlq', 'list', '--older-than', '5x'], /must be a duration/],
    [['cleanup', '--outbox-older-than', '-5s'], /must be a duration/],
    [['metrics', '--port', '70000'], /must be a port, 0 to 65535/],
    [
      [
        'topology',
        '--queue-prefix',
        'p',
        '--partitions',
        '0',
        '--amqp-url',
        `amqp://guest:guest@127.0.0.1:${closedPort}`,
      ],
      /option '--partitions <n>' argument '0' is invalid\. must be a positive integer/,
    ],
  ];
  for (const [args, says] of cases) {
    const result = await cli([...nowhere, ...args]);
    assert.equal(result.code, 1, args.join(' '));
    assert.match(result.stderr, says, args.join(' '));
    assert.doesNotMatch(result.stderr, /ECONNREFUSED|UNAVAILABLE/, `${args.join(' ')} never connected`);
  }
});

test('durations take units', async () => {
  const result = await cli(['--schema', db.schema, 'dlq', 'list', '--older-than', '2h', '--json']);
  assert.equal(result.code, 0, result.stderr);
  assert.deepEqual(JSON.parse(result.stdout), []);
});

test('--version prints the package version', async () => {
  const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
    version: string;
  };
  const result = await cli(['--version']);
  assert.equal(result.code, 0);
  assert.equal(result.stdout.trim(), version);
});

test('metrics --port 0 prints the port it bound; with the database down /healthz is 200, /readyz 503, /metrics 200 with converge_database_up 0', async () => {
  const child = runCli([
    '--database-url',
    `postgres://postgres@127.0.0.1:${closedPort}/test`,
    'metrics',
    '--port',
    '0',
  ]);
  let stdout = '';
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  const exited = once(child, 'exit');
  try {
    const port = await waitFor(() => /serving \/metrics on 127\.0\.0\.1:(\d+)/.exec(stdout)?.[1], 'the bound port');
    assert.notEqual(port, '0');
    const base = `http://127.0.0.1:${port}`;
    assert.equal((await fetch(`${base}/healthz`)).status, 200, 'alive: a restart would not bring the database back');
    assert.equal((await fetch(`${base}/readyz`)).status, 503);
    const metrics = await fetch(`${base}/metrics`);
    assert.equal(metrics.status, 200);
    const body = await metrics.text();
    assert.match(body, /^converge_database_up 0$/m);
    assert.match(body, /^converge_outbox_oldest_pending_seconds nan$/im);
  } finally {
    child.kill('SIGTERM');
    await exited;
  }
});
