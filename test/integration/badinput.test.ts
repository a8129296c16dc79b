/**
 * The bad input corpus against a real consumer: bodies published with a plain amqplib
 * channel (not converge's producer), each bad one between two good ones. Every bad message
 * must land in quarantine with its own reason, the good ones must keep applying, nothing may
 * be acked without its durable row, and no log line may carry a payload.
 */
import { DEFAULT_RETRY_TIERS_MS, retryTiers } from '../../src/transport/queue-arguments.js';
import assert from 'node:assert/strict';
import { pino } from 'pino';
import {
  applyIncrement,
  type Consumer,
  type EventEnvelope,
  type EventHandler,
  type Logger,
  type Settlement,
} from '../../src/index.js';
import { fingerprint, parseEnvelope } from '../../src/internal/index.js';
import { describe, test, waitFor, orderEvent } from '../support/rig.js';
import { withBadInputRig } from '../support/badinput-rig.js';

const SECRET = 'SECRET-BADINPUT-7f3a';
const PROJECTION = 'order_total';
const TEN_MIB = 10 * 1024 * 1024;

/** A real pino logger at debug whose lines are kept, so the scan sees exactly what would reach stdout. */
function capturingPino(): Logger & { lines: string[] } {
  const lines: string[] = [];
  const logger = pino({ name: 'badinput', level: 'debug' }, { write: (line: string) => void lines.push(line) });
  return Object.assign(logger, { lines });
}

/** The projection: a versioned running total per order, and a count of applied events. */
function applyTotal(schema: string): EventHandler {
  return async (event, { tx }) => {
    await applyIncrement(tx, { projection: PROJECTION, event, schema }, async () => {
      return tx.query(
        `INSERT INTO "${schema}".order_total (aggregate_id, total, events) VALUES ($1, $2, 1)
         ON CONFLICT (aggregate_id) DO UPDATE SET total = order_total.total + EXCLUDED.total, events = order_total.events + 1`,
        [event.aggregateId, (event.payload as { delta: number }).delta],
      );
    });
  };
}

/** An order event whose payload always carries the secret, to prove it never reaches logs. */
function envelope(
  eventId: string,
  aggregateId: string,
  version: number,
  payload: Record<string, unknown>,
): EventEnvelope {
  return orderEvent(eventId, aggregateId, version, { payload: { note: SECRET, ...payload } });
}

const json = (value: unknown) => Buffer.from(JSON.stringify(value));

/** The same body text with one literal replaced, for values JSON.stringify cannot write (1e400, 30-digit integers). */
function withLiteral(value: EventEnvelope, path: 'aggregateVersion' | 'payload.big', literal: string): Buffer {
  const text = JSON.stringify(
    path === 'aggregateVersion' ? value : { ...value, payload: { ...(value.payload as object), big: 0 } },
  );
  const needle = path === 'aggregateVersion' ? `"aggregateVersion":${value.aggregateVersion}` : '"big":0';
  assert.ok(text.includes(needle));
  return Buffer.from(text.replace(needle, `${needle.split(':')[0]}:${literal}`));
}

interface Bad {
  label: string;
  body: Buffer;
  reason: string;
  /** What the detail must say: the field for field errors, the problem for body errors. */
  detail: RegExp;
  /** The eventId the row must carry (only when the envelope itself was valid). */
  eventId?: string;
}

/** ids a careless consumer would splice into SQL; they must be stored as data, byte for byte. */
const SQL_AGGREGATE = `o'1; DROP TABLE ${PROJECTION}; --`;
const SQL_EVENT = `e"1'); DELETE FROM inbox; --`;
const SQL_BAD_EVENT = `x' OR '1'='1"; DROP TABLE quarantine; --`;

function corpus(): Bad[] {
  const sample = envelope('B-sample', 'o-bad', 1, { delta: 1000 });
  const text = JSON.stringify(sample);
  const at = text.indexOf(SECRET);
  const { aggregateId: _dropped, ...missing } = sample;
  // Exactly 10 MiB of JSON that carries the marker; never parsed, so its shape does not matter.
  const prefix = JSON.stringify({ ...sample, payload: { note: SECRET, blob: '' } }).slice(0, -3);
  const huge = Buffer.from(`${prefix}${'x'.repeat(TEN_MIB - prefix.length - 3)}"}}`);
  assert.equal(huge.length, TEN_MIB);
  const deep = Buffer.from(
    text.replace('"payload":{', `"payload":{"deep":${'['.repeat(100_000)}${']'.repeat(100_000)},`),
  );
  return [
    {
      label: 'malformed-json',
      body: Buffer.from(`{"eventId": "B-json", "payload": {"note": ${SECRET}}}`),
      reason: 'malformed-body',
      detail: /"\(body\)": not valid JSON$/,
    },
    {
      label: 'truncated',
      body: Buffer.from(text.slice(0, at + 4)),
      reason: 'malformed-body',
      detail: /"\(body\)": not valid JSON$/,
    },
    {
      label: 'empty',
      body: Buffer.alloc(0),
      reason: 'malformed-body',
      detail: /"\(body\)": not valid JSON: empty body$/,
    },
    {
      label: 'too-large',
      body: huge,
      reason: 'body-too-large',
      detail: new RegExp(`"\\(body\\)": ${TEN_MIB} bytes exceeds limit of ${256 * 1024}$`),
    },
    {
      label: 'missing-field',
      body: json(missing),
      reason: 'invalid-envelope',
      detail: /"aggregateId": expected string$/,
    },
    {
      label: 'wrong-type',
      body: json({ ...sample, aggregateVersion: SECRET }),
      reason: 'invalid-envelope',
      detail: /"aggregateVersion": expected number$/,
    },
    {
      label: 'wrong-type-kind',
      body: json({ ...sample, kind: SECRET }),
      reason: 'invalid-envelope',
      detail: /"kind": not one of the allowed values$/,
    },
    {
      label: 'negative-version',
      body: json({ ...sample, aggregateVersion: -3 }),
      reason: 'invalid-envelope',
      detail: /"aggregateVersion": must be greater than 0$/,
    },
    {
      label: 'zero-version',
      body: json({ ...sample, aggregateVersion: 0 }),
      reason: 'invalid-envelope',
      detail: /"aggregateVersion": must be greater than 0$/,
    },
    {
      label: 'zero-schema-version',
      body: json({ ...sample, schemaVersion: 0 }),
      reason: 'invalid-envelope',
      detail: /"schemaVersion": must be greater than 0$/,
    },
    {
      label: 'unknown-event-type',
      body: json({ ...sample, eventId: 'B-type', eventType: 'OrderTeleported' }),
      reason: 'unknown-event-type',
      detail: /no handler for eventType OrderTeleported/,
      eventId: 'B-type',
    },
    {
      label: 'newer-schema',
      body: json({ ...sample, eventId: 'B-schema', schemaVersion: 2 }),
      reason: 'unsupported-schema-version',
      detail: /AmountAdded schemaVersion 2 \(current 1\): newer than this consumer knows/,
      eventId: 'B-schema',
    },
    {
      label: 'invalid-utf8',
      body: Buffer.concat([
        Buffer.from(text.slice(0, at)),
        Buffer.from([0xff, 0xfe, 0xc3]),
        Buffer.from(text.slice(at)),
      ]),
      reason: 'malformed-body',
      detail: /"\(body\)": not valid UTF-8$/,
    },
    {
      label: 'huge-version',
      body: withLiteral(sample, 'aggregateVersion', '123456789012345678901234567890'),
      reason: 'invalid-envelope',
      detail: /"aggregateVersion": must be at most 9007199254740991$/,
    },
    {
      label: 'infinite-number',
      body: withLiteral(sample, 'payload.big', '1e400'),
      reason: 'invalid-envelope',
      detail: /"payload": holds a number outside the range of a double$/,
    },
    {
      label: 'deep-nesting',
      body: deep,
      reason: 'malformed-body',
      detail: /"\(body\)": nested deeper than 64 levels$/,
    },
    {
      label: 'not-an-object',
      body: json([sample]),
      reason: 'malformed-body',
      detail: /"\(body\)": expected a JSON object$/,
    },
    {
      label: 'sql-ids',
      body: json({ ...sample, eventId: SQL_BAD_EVENT, aggregateId: SQL_AGGREGATE, eventType: 'Order_Dropped' }),
      reason: 'unknown-event-type',
      detail: /no handler for eventType Order_Dropped/,
      eventId: SQL_BAD_EVENT,
    },
  ];
}

describe('bad input corpus through a plain AMQP publish', () => {
  test('each bad message is quarantined with its own reason while the good ones around it apply, and no log line carries a payload', async () => {
    await withBadInputRig('cvbad', async (rig) => {
      await rig.db.pool.query(
        `CREATE TABLE ${rig.q}.order_total (aggregate_id text PRIMARY KEY, total numeric NOT NULL, events integer NOT NULL)`,
      );
      const logger = capturingPino();
      const errors: unknown[] = [];
      const settled: Settlement[] = [];
      // AmountAdded is known at schema version 1 (the rig's default): the newer-schema case depends on it.
      const consumer: Consumer = rig.start({ logger, handlers: { AmountAdded: applyTotal(rig.db.schema) } });
      consumer.on('error', (err) => errors.push(err));
      consumer.on('settled', (s) => settled.push(s));
      try {
        await consumer.ready();
        const bad = corpus();
        const original = envelope('E-dup', 'o1', 1, { delta: 1 });
        const impostor = { ...original, payload: { note: SECRET, delta: 500 } };
        bad.push({
          label: 'same-id-different-content',
          body: json(impostor),
          reason: 'content-conflict',
          detail: /E-dup was already recorded/,
          eventId: 'E-dup',
        });

        // Good events: o1 versions 1..n (E-dup first), one with a 30-digit payload number, one with SQL-shaped ids.
        const good: Buffer[] = [json(original)];
        for (let version = 2; good.length < bad.length; version++)
          good.push(json(envelope(`E${version}`, 'o1', version, { delta: version })));
        const bigNumber = withLiteral(
          envelope('E-big', 'o2', 1, { delta: 7 }),
          'payload.big',
          '123456789012345678901234567890',
        );
        good.push(bigNumber, json(envelope(SQL_EVENT, SQL_AGGREGATE, 1, { delta: 3 })));

        // As any other client would publish: JSON content type, a message id of its own.
        const publish = (label: string, body: Buffer) =>
          rig.publish(label, body, { contentType: 'application/json', messageId: `M-${label}` });
        // good, bad, good, bad, ... good: every bad message has good neighbours on both sides.
        for (const [i, body] of good.entries()) {
          await publish(`good-${i}`, body);
          const next = bad[i];
          if (next) await publish(next.label, next.body);
        }

        const expectedO1 = good
          .slice(0, bad.length)
          .reduce((sum, body) => sum + (parseEnvelope(body).payload as { delta: number }).delta, 0);
        const count = async (sql: string, values: unknown[] = []) =>
          Number((await rig.db.pool.query<{ n: string }>(sql.replaceAll('$schema', rig.q), values)).rows[0]?.n ?? 0);
        await waitFor(
          async () =>
            (await count(`SELECT count(*) AS n FROM $schema.quarantine`)) === bad.length &&
            (await count(`SELECT coalesce(sum(events), 0) AS n FROM $schema.order_total`)) === good.length,
          'every good event applied and every bad one quarantined',
          60_000,
        );
        assert.ok(consumer.subscribed, 'the consumer is still subscribed');
        assert.deepEqual(errors, [], "the consumer never emitted 'error'");
        assert.equal(consumer.stats.retried, 0, 'no bad message was retried: each was judged permanent at once');

        // The projection: every good event applied once, nothing of the bad ones (the impostor's 500 included).
        const { rows: totals } = await rig.db.pool.query<{ aggregate_id: string; total: string; events: number }>(
          `SELECT aggregate_id, total::text, events FROM ${rig.q}.order_total`,
        );
        assert.deepEqual(
          totals.sort((a, b) => (a.aggregate_id < b.aggregate_id ? -1 : 1)),
          [
            { aggregate_id: SQL_AGGREGATE, total: '3', events: 1 },
            { aggregate_id: 'o1', total: String(expectedO1), events: bad.length },
            { aggregate_id: 'o2', total: '7', events: 1 },
          ].sort((a, b) => (a.aggregate_id < b.aggregate_id ? -1 : 1)),
        );
        assert.equal(
          await count(`SELECT count(*) AS n FROM $schema.inbox`),
          good.length,
          'one inbox row per good event, none for a bad one',
        );
        assert.equal(
          await count(`SELECT count(*) AS n FROM $schema.inbox WHERE event_id = $1`, [SQL_EVENT]),
          1,
          'the SQL-shaped eventId is stored as data',
        );
        const { rows: bigRow } = await rig.db.pool.query<{ fingerprint: string }>(
          `SELECT fingerprint FROM ${rig.q}.inbox WHERE event_id = 'E-big'`,
        );
        assert.equal(
          bigRow[0]?.fingerprint,
          fingerprint(parseEnvelope(bigNumber)),
          'a 30-digit number is kept as a double with a stable fingerprint',
        );

        // One row per bad message, each with its own reason, detail and the exact raw bytes.
        const { rows } = await rig.db.pool.query<{
          id: string;
          reason: string;
          detail: string;
          event_id: string | null;
          fingerprint: string | null;
          body: Buffer;
          properties: { headers?: Record<string, unknown> };
          failure_class: string;
        }>(
          `SELECT id, reason, detail, event_id, fingerprint, body, properties, failure_class FROM ${rig.q}.quarantine ORDER BY id`,
        );
        assert.equal(rows.length, bad.length);
        const byLabel = new Map(rows.map((row) => [String(row.properties.headers?.['x-test-case']), row]));
        for (const expected of bad) {
          const row = byLabel.get(expected.label);
          assert.ok(row, `a quarantine row for ${expected.label}`);
          assert.equal(row.reason, expected.reason, expected.label);
          assert.match(row.detail, expected.detail, expected.label);
          assert.ok(!row.detail.includes(SECRET), `${expected.label}: the detail quotes the payload: ${row.detail}`);
          assert.equal(
            row.event_id,
            expected.eventId ?? null,
            `${expected.label}: an eventId only from a valid envelope`,
          );
          assert.equal(row.failure_class, 'permanent', expected.label);
          assert.ok(row.body.equals(expected.body), `${expected.label}: the raw body is kept byte for byte`);
        }
        assert.ok(
          byLabel.get('invalid-utf8')!.body.includes(Buffer.from([0xff, 0xfe, 0xc3])),
          'the invalid bytes themselves are kept, not U+FFFD',
        );
        assert.equal(byLabel.get('same-id-different-content')!.fingerprint, fingerprint(impostor));

        // Every quarantined settlement points at a committed row: nothing was settled ahead of its row.
        const quarantined = settled.flatMap((s) =>
          s.action === 'ack' && s.outcome === 'quarantined' ? [s.quarantineId] : [],
        );
        assert.deepEqual(quarantined.sort(), rows.map((r) => r.id).sort());
        assert.equal(settled.filter((s) => s.action === 'ack' && s.outcome === 'applied').length, good.length);
        assert.equal(settled.length, good.length + bad.length, 'every delivery settled exactly once');

        // The SQL fragments stayed data: the tables they name are all there.
        for (const table of [PROJECTION, 'inbox', 'quarantine'])
          assert.equal(
            await count(`SELECT count(*) AS n FROM pg_tables WHERE schemaname = $1 AND tablename = $2`, [
              rig.db.schema,
              table,
            ]),
            1,
            table,
          );

        // Logs: the quarantines are there, with ids and reasons, and no payload or body anywhere.
        const quarantineLines = logger.lines.filter((line) => line.includes('delivery quarantined'));
        assert.equal(quarantineLines.length, bad.length);
        for (const line of logger.lines) {
          assert.ok(!line.includes(SECRET), `a log line carries the payload: ${line.slice(0, 300)}`);
          for (const { label, body } of bad) {
            if (body.length > 16 && body.length < 1024 * 1024)
              assert.ok(!line.includes(body.toString('utf8').slice(0, 64)), `a log line carries the body of ${label}`);
          }
        }
      } finally {
        await consumer.stop();
      }
      // Acked only once durable: nothing is left on the broker and every bad message has its row.
      assert.equal(await rig.messageCount(rig.queue), 0, 'every delivery was acked');
      for (const tier of retryTiers(rig.queue, DEFAULT_RETRY_TIERS_MS))
        assert.equal(await rig.messageCount(tier.queue), 0, `none is waiting for a retry in ${tier.queue}`);
    });
  });
});
