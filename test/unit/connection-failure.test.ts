/**
 * The connection-failure classifier, without I/O. The error shapes below are the ones pg 8 and
 * amqplib 2 produced against the local PostgreSQL and RabbitMQ (see docs/troubleshooting.md);
 * 28P01 cannot be produced on a trust-auth server, so its shape is pg's for that SQLSTATE.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  checkBrokerUrl,
  checkDatabaseUrl,
  classifyBrokerError,
  classifyDatabaseError,
  judgeFailure,
} from '../../src/runtime/connection-failure.js';
import { brokerTarget, databaseTarget } from '../../src/runtime/connection-target.js';
import {
  ConnectionConfigError,
  SchemaNotMigratedError,
  ServiceUnavailableError,
  describeFailure,
} from '../../src/runtime/errors.js';

const db = { endpoint: '127.0.0.1:5432', name: 'orders' };
const broker = { endpoint: '127.0.0.1:5672', name: 'prod' };

/** A pg DatabaseError as the driver builds it: name 'error', SQLSTATE in `code`, severity FATAL. */
const pgError = (code: string, message: string) =>
  Object.assign(new Error(message), { name: 'error', code, severity: 'FATAL' });
const systemError = (code: string) => Object.assign(new Error(`connect ${code} 127.0.0.1:5999`), { code });

describe('classifyDatabaseError', () => {
  const permanent: [string, string, string][] = [
    ['28P01', 'password authentication failed for user "app"', 'auth-failed'],
    ['28000', 'role "nosuchrole" does not exist', 'access-denied'],
    [
      '28000',
      'no pg_hba.conf entry for host "10.0.0.5", user "app", database "orders", no encryption',
      'access-denied',
    ],
    ['3D000', 'database "nosuchdb" does not exist', 'not-found'],
  ];
  for (const [code, message, kind] of permanent) {
    it(`${code} (${message.slice(0, 30)}…) is permanent: ${kind}`, () => {
      const failure = classifyDatabaseError(pgError(code, message), db)!;
      assert.equal(failure.kind, kind);
      assert.equal(failure.permanent, true);
      assert.equal(failure.service, 'PostgreSQL');
      assert.equal(failure.endpoint, '127.0.0.1:5432');
      assert.equal(failure.detail, code);
      assert.ok(failure.hint, 'says what to do');
      // converge's own wording: the driver's message (user names, client addresses) is not repeated.
      assert.doesNotMatch(describeFailure(failure), /app|10\.0\.0\.5|nosuchrole/);
    });
  }

  // PgBouncer 1.18 hands on the server's refusal with its own 08P01: the messages are what it sent, seen through a real one.
  const throughPgBouncer: [string, string][] = [
    ['database "nosuchdb" does not exist', 'not-found'],
    ['no such user', 'access-denied'],
    ['password authentication failed for user "app"', 'auth-failed'],
  ];
  for (const [message, kind] of throughPgBouncer)
    it(`08P01 from PgBouncer with "${message}" is the server's refusal: ${kind}, permanent`, () => {
      const failure = classifyDatabaseError(pgError('08P01', message), db)!;
      assert.equal(failure.kind, kind);
      assert.equal(failure.permanent, true);
    });

  it('any other 08P01 stays a transient connection failure', () => {
    const failure = classifyDatabaseError(pgError('08P01', 'server login has been failing, try again later'), db)!;
    assert.equal(failure.kind, 'unavailable');
  });

  it('names the missing database, which the message may show', () => {
    assert.match(
      describeFailure(classifyDatabaseError(pgError('3D000', 'x'), db)!),
      /database "orders" does not exist/,
    );
  });

  const transient: [unknown, string][] = [
    [systemError('ECONNREFUSED'), 'ECONNREFUSED'],
    [systemError('ETIMEDOUT'), 'ETIMEDOUT'],
    [Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }), 'ECONNRESET'],
    [systemError('ENOTFOUND'), 'ENOTFOUND'],
    [pgError('57P01', 'terminating connection due to administrator command'), '57P01'],
    [pgError('57P03', 'the database system is starting up'), '57P03'],
    [pgError('53300', 'sorry, too many clients already'), '53300'],
    [pgError('08006', 'connection failure'), '08006'],
    [new Error('Connection terminated unexpectedly'), 'TERMINATED'],
    [new Error('Connection terminated due to connection timeout'), 'TERMINATED'],
  ];
  for (const [err, detail] of transient) {
    it(`${detail} is transient`, () => {
      const failure = classifyDatabaseError(err, db)!;
      assert.equal(failure.permanent, false);
      assert.equal(failure.kind, 'unavailable');
      assert.equal(failure.detail, detail);
      assert.ok(failure.reason.length > 5);
    });
  }

  it('TLS refusals are permanent', () => {
    assert.equal(classifyDatabaseError(new Error('The server does not support SSL connections'), db)?.kind, 'rejected');
    assert.equal(
      classifyDatabaseError(Object.assign(new Error('self-signed'), { code: 'DEPTH_ZERO_SELF_SIGNED_CERT' }), db)?.kind,
      'rejected',
    );
  });

  it('a SQL error is not a connection failure', () => {
    assert.equal(classifyDatabaseError(pgError('42P01', 'relation "x" does not exist'), db), undefined);
    assert.equal(classifyDatabaseError(pgError('23505', 'duplicate key'), db), undefined);
    assert.equal(classifyDatabaseError(new TypeError('bug'), db), undefined);
  });
});

describe('classifyBrokerError', () => {
  it('a refused login (wrong user or password) is permanent', () => {
    const err = new Error(
      'Handshake terminated by server: 403 (ACCESS-REFUSED) with message "ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN. For details see the broker logfile."',
    );
    const failure = classifyBrokerError(err, broker)!;
    assert.deepEqual(
      [failure.service, failure.kind, failure.permanent, failure.detail],
      ['RabbitMQ', 'auth-failed', true, 'ACCESS_REFUSED'],
    );
  });

  it('a refused vhost (amqplib drops the reply text of the ConnectionClose) is permanent and names the vhost', () => {
    const failure = classifyBrokerError(
      new Error('Expected ConnectionOpenOk; got <ConnectionClose channel:0>'),
      broker,
    )!;
    assert.equal(failure.kind, 'access-denied');
    assert.equal(failure.detail, 'NOT_ALLOWED');
    assert.match(failure.reason, /vhost "prod"/);
  });

  it('a non-amqp scheme reaching amqplib is permanent', () => {
    const failure = classifyBrokerError(new Error('Expected amqp: or amqps: as the protocol; got http:'), broker)!;
    assert.equal(failure.kind, 'invalid-url');
  });

  it('channel-level 403 and 406 are permanent, 404 and 320 wait', () => {
    const channel = (code: number) => Object.assign(new Error(`Operation failed: ${code}`), { code });
    assert.equal(classifyBrokerError(channel(403), broker)?.kind, 'access-denied');
    assert.equal(classifyBrokerError(channel(406), broker)?.kind, 'rejected');
    assert.equal(classifyBrokerError(channel(404), broker)?.permanent, false);
    assert.equal(classifyBrokerError(channel(320), broker)?.permanent, false);
  });

  it('refused, reset, cut handshakes and closed channels are transient', () => {
    for (const err of [
      systemError('ECONNREFUSED'),
      systemError('ECONNRESET'),
      systemError('ETIMEDOUT'),
      new Error('Socket closed abruptly during opening handshake'),
      new Error('Channel closed'),
      new Error('Connection closed: 320 (CONNECTION-FORCED)'),
    ]) {
      const failure = classifyBrokerError(err, broker);
      assert.equal(failure?.permanent, false, err.message);
      assert.equal(failure?.service, 'RabbitMQ');
    }
  });
});

describe('URLs', () => {
  it('checkDatabaseUrl refuses what pg would misread, and accepts postgres URLs and socket paths', () => {
    for (const bad of ['notaurl', 'http://db:5432/x', 'host=db dbname=x', 'mysql://db/x']) {
      const failure = checkDatabaseUrl(bad);
      assert.equal(failure?.kind, 'invalid-url', bad);
      assert.equal(failure?.permanent, true);
    }
    for (const good of [
      'postgres://u:p@db:5432/x',
      'postgresql://db/x',
      'socket:/var/run/postgresql?db=x',
      '/var/run/postgresql x',
    ])
      assert.equal(checkDatabaseUrl(good), undefined, good);
  });

  it('checkBrokerUrl refuses http:// and text that is no URL', () => {
    assert.match(checkBrokerUrl('http://guest:guest@mq:15672')!.reason, /scheme "http:"/);
    assert.equal(checkBrokerUrl('notaurl')?.kind, 'invalid-url');
    assert.equal(checkBrokerUrl('amqp://mq'), undefined);
    assert.equal(checkBrokerUrl('amqps://mq'), undefined);
  });

  it('targets are host:port and a name, never the user or password', () => {
    assert.deepEqual(databaseTarget('postgres://app:s3cret@db.internal:6543/orders'), {
      endpoint: 'db.internal:6543',
      name: 'orders',
    });
    assert.deepEqual(databaseTarget('postgres://app:s3cret@db/orders'), { endpoint: 'db:5432', name: 'orders' });
    assert.deepEqual(databaseTarget('notaurl'), { endpoint: '(unparseable url)' });
    assert.deepEqual(brokerTarget('amqp://guest:s3cret@mq'), { endpoint: 'mq:5672', name: '/' });
    assert.deepEqual(brokerTarget('amqps://guest:s3cret@mq/prod'), { endpoint: 'mq:5671', name: 'prod' });
    for (const url of ['postgres://app:s3cret@db/orders', 'notaurl://app:s3cret@x']) {
      const failure = checkDatabaseUrl(url) ?? classifyDatabaseError(pgError('28P01', ''), databaseTarget(url))!;
      assert.doesNotMatch(describeFailure(failure), /s3cret|app/);
    }
  });
});

describe('judgeFailure', () => {
  const wrongPassword = new ConnectionConfigError(classifyDatabaseError(pgError('28P01', ''), db)!);

  it('a permanent failure before the component ever worked is fatal', () => {
    const judged = judgeFailure(pgError('3D000', 'x'), db, false);
    assert.ok(judged.fatal instanceof ConnectionConfigError);
    assert.equal(judged.fatal.code, 'CONVERGE_DATABASE_NOT_FOUND');
    assert.equal(judgeFailure(wrongPassword, db, false).fatal, wrongPassword);
  });

  it('after it worked, the same failure is retried (logged as permanent)', () => {
    const judged = judgeFailure(wrongPassword, db, true);
    assert.equal(judged.fatal, undefined);
    assert.equal(judged.failure?.permanent, true);
  });

  it('an unmigrated schema at start is fatal', () => {
    const err = new SchemaNotMigratedError('converge', db.endpoint, 0, 9);
    assert.equal(judgeFailure(err, db, false).fatal, err);
  });

  it('transient failures are never fatal; log fields name service, endpoint, code and reason', () => {
    const judged = judgeFailure(
      new ServiceUnavailableError(classifyBrokerError(systemError('ECONNREFUSED'), broker)!),
      db,
      false,
    );
    assert.equal(judged.fatal, undefined);
    assert.deepEqual(Object.keys(judged.fields).sort(), ['code', 'endpoint', 'reason', 'service']);
    assert.equal(judged.fields.service, 'RabbitMQ');
  });

  it('an error that is no connection failure is logged by class and code only', () => {
    const judged = judgeFailure(Object.assign(new Error('value "secret" is bad'), { code: '22P02' }), db, false);
    assert.deepEqual(judged.fields, { err: 'Error', code: '22P02' });
    assert.equal(judged.fatal, undefined);
  });
});

describe('PostgreSQL connection strings: every form node-postgres reads', () => {
  const accepted: [string, { endpoint: string; name?: string }][] = [
    [
      'postgres://app:s3cret@/orders?host=/var/run/postgresql',
      { endpoint: '/var/run/postgresql:5432', name: 'orders' },
    ],
    ['postgresql:///orders?host=/tmp&port=5433', { endpoint: '/tmp:5433', name: 'orders' }],
    ['postgres://app@%2Fvar%2Frun%2Fpostgresql/orders', { endpoint: '/var/run/postgresql:5432', name: 'orders' }],
    ['postgres://app@/orders', { endpoint: 'localhost:5432', name: 'orders' }],
    ['postgres://app@db:6432/orders?sslmode=verify-full&application_name=x', { endpoint: 'db:6432', name: 'orders' }],
    ['postgres://app@db/my orders', { endpoint: 'db:5432', name: 'my orders' }],
    ['socket:/var/run/postgresql?db=orders', { endpoint: '/var/run/postgresql', name: 'orders' }],
    ['/var/run/postgresql orders', { endpoint: '/var/run/postgresql', name: 'orders' }],
  ];
  for (const [url, target] of accepted)
    it(`accepts ${url}`, () => {
      assert.equal(checkDatabaseUrl(url), undefined);
      assert.deepEqual(databaseTarget(url), target);
    });

  it("accepts libpq's host lists, naming every host as the endpoint", () => {
    const url = 'postgres://app:s3cret@db1:5432,db2:5433/orders?target_session_attrs=read-write';
    assert.equal(checkDatabaseUrl(url), undefined);
    assert.deepEqual(databaseTarget(url), { endpoint: 'db1:5432,db2:5433', name: 'orders' });
  });

  for (const [url, why] of [
    ['postgres://app:s3cret@db1:5432,/orders', /empty host/],
    ['postgres://app:s3cret@db1:5432,db2:x/orders', /not a number/],
    ['postgres://app:s3cret@db1,db2/orders?target_session_attrs=standby', /any, read-write or primary/],
  ] as const)
    it(`refuses the host list of ${url.replace('s3cret', '***')}, naming why without the password`, () => {
      const failure = checkDatabaseUrl(url);
      assert.ok(failure);
      assert.equal(failure.kind, 'invalid-url');
      assert.match(describeFailure(failure), why);
      assert.doesNotMatch(describeFailure(failure), /s3cret/);
    });
});
